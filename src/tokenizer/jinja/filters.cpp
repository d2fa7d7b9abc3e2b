// Jinja's filters (jinja2/filters.py) on template values, with transformers' tojson. Each
// follows its jinja2 function: the same parameters (by position or keyword), the same lazy
// generators where jinja2 returns one, and Python's conversions (int('42.5') fails, so |int
// tries float('42.5') next, as do_int does).
#include "src/tokenizer/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "src/tokenizer/jinja/call_args.h"
#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/iterators.h"
#include "src/tokenizer/jinja/json.h"
#include "src/tokenizer/jinja/methods.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"
#include "src/tokenizer/jinja/string_format.h"

namespace ferry::jinja {
namespace {

const std::string kDot = ".", kComma = ",";

// soft_str: a string stays itself (Markup included), anything else becomes str(value).
Value soft_str(const Value& v) { return v.is_string() ? v : Value::string(to_str(v)); }

Value keep_markup(const Value& like, std::string s) { return Value::string(std::move(s), like.is_markup()); }

// --- attribute paths (make_attrgetter) -------------------------------------------------------

std::vector<Value> attribute_parts(const Value& attribute) {
  std::vector<Value> parts;
  if (attribute.is_none() || attribute.is_undefined()) return parts;
  if (!attribute.is_string()) return {attribute};
  for (std::string& part : pystr::split(attribute.str(), &kDot, -1)) {
    const bool digits = !part.empty() && pystr::all_chars(part, pystr::CharClass::digit) && pystr::is_ascii(part);
    parts.push_back(digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(std::move(part)));
  }
  return parts;
}

Value lower_if_string(const Value& v) { return v.is_string() ? Value::string(pystr::lower(v.str())) : v; }

struct AttrGetter {
  std::vector<Value> parts;
  Value fallback;  // used when a step is undefined (map's default=)
  bool ignore_case = false;

  Value operator()(Value item) const {
    for (const Value& part : parts) {
      item = get_item(item, part);
      if (!fallback.is_undefined() && item.is_undefined()) item = fallback;
    }
    return ignore_case ? lower_if_string(item) : item;
  }
};

// make_multi_attrgetter: "age,name" gives a list of values to sort by.
Value multi_key(const std::vector<AttrGetter>& getters, const Value& item) {
  if (getters.size() == 1) return getters[0](item);
  std::vector<Value> keys;
  for (const AttrGetter& g : getters) keys.push_back(g(item));
  return Value::make_list(std::move(keys));
}

std::vector<AttrGetter> multi_getters(const Value& attribute, bool ignore_case) {
  std::vector<AttrGetter> getters;
  if (attribute.is_string()) {
    for (std::string& part : pystr::split(attribute.str(), &kComma, -1)) {
      getters.push_back(AttrGetter{attribute_parts(Value::string(std::move(part))), Value(), ignore_case});
    }
  } else {
    getters.push_back(AttrGetter{attribute_parts(attribute), Value(), ignore_case});
  }
  return getters;
}

// --- Python number parsing, for |int and |float ---------------------------------------------

// Digits with single underscores between them (PEP 515), underscores removed; nullopt if invalid.
std::optional<std::string> without_underscores(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || s[i - 1] == '_' || !std::isalnum(static_cast<unsigned char>(s[i + 1])) ||
          !std::isalnum(static_cast<unsigned char>(s[i - 1]))) {
        return std::nullopt;
      }
      continue;
    }
    out += s[i];
  }
  return out;
}

std::optional<double> python_float(const std::string& text) {
  const std::string t = pystr::strip(text, true, true);
  std::string lower = pystr::lower(t);
  size_t sign = lower.empty() || (lower[0] != '+' && lower[0] != '-') ? 0 : 1;
  const std::string body = lower.substr(sign);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return sign && lower[0] == '-' ? -v : v;
  }
  const auto digits = without_underscores(body);
  if (!digits || digits->empty() || digits->find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  const std::string number = lower.substr(0, sign) + *digits;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || number.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  return v;
}

std::optional<int64_t> python_int(const std::string& text, int64_t base) {
  std::string t = pystr::strip(text, true, true);
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t.erase(0, 1);
  }
  std::string lower = pystr::lower(t);
  const auto prefixed = [&](char p, int64_t b) {
    return lower.size() > 2 && lower[0] == '0' && lower[1] == p && (base == 0 || base == b);
  };
  if (prefixed('x', 16) || prefixed('o', 8) || prefixed('b', 2)) {
    base = lower[1] == 'x' ? 16 : lower[1] == 'o' ? 8 : 2;
    lower = lower.substr(2);
    if (!lower.empty() && lower[0] == '_') lower.erase(0, 1);
  } else if (base == 0) {
    base = 10;
    if (lower.size() > 1 && lower[0] == '0' && lower.find_first_not_of("0_") != std::string::npos) return std::nullopt;
  }
  if (base < 2 || base > 36) throw Failure("ValueError: int() base must be >= 2 and <= 36, or 0");
  const auto digits = without_underscores(lower);
  if (!digits || digits->empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : *digits) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    v = checked_add(checked_mul(v, base), d);
  }
  return negative ? -v : v;
}

// --- strings -------------------------------------------------------------------------------

// upper, lower, capitalize: soft_str(value).upper() and so on.
template <std::string (*transform)(std::string_view)>
Value f_transform(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "the filter");
  const Value s = soft_str(v);
  return keep_markup(s, transform(s.str()));
}

// jinja2's title: words begin after runs of `-`, whitespace, ( { [ <; each becomes
// word[0].upper() + word[1:].lower().
Value f_title(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "title");
  const std::string s = to_str(v);
  std::string out;
  size_t word_start = std::string::npos;
  auto flush = [&](size_t end) {
    if (word_start != std::string::npos) out += pystr::title_word(std::string_view(s).substr(word_start, end - word_start));
    word_start = std::string::npos;
  };
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    const char32_t c = pystr::decode(s, pos);
    const bool boundary = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pystr::is_space(c);
    if (boundary) {
      flush(at);
      out.append(s, at, pos - at);
    } else if (word_start == std::string::npos) {
      word_start = at;
    }
  }
  flush(s.size());
  return Value::string(std::move(out));
}

Value f_trim(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "trim", {"chars"});
  const Value s = soft_str(v);
  return keep_markup(s, pystr::strip(s.str(), true, true, a.string_or_null(0)));
}

Value f_replace(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "replace", {"old", "new", "count"});
  std::string out = pystr::replace(to_str(v), to_str(a.get(0)), to_str(a.get(1)), a.int_or(2, -1));
  ev.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_string(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "string");
  return soft_str(v);
}

Value f_safe(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "safe");
  return Value::string(to_str(v), true);
}

Value f_escape(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "escape");
  return v.is_markup() ? v : Value::string(escape_html(to_str(v)), true);
}

Value f_forceescape(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "forceescape");
  return Value::string(escape_html(to_str(v)), true);
}

Value f_center(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "center", {"width"});
  CallArgs width;
  width.positional.push_back(Value::integer(a.int_or(0, 80)));
  const auto center = find_method(soft_str(v), "center");
  return center->object().call(ev, width);
}

Value f_indent(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "indent", {"width", "first", "blank"});
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) throw Failure("TypeError: unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  std::string indention = " ";
  if (a.has(0) && a.get(0).is_string()) {
    indention = a.get(0).str();
  } else {
    const int64_t width = a.has(0) ? to_index(a.get(0), "indent width") : 4;
    ev.check_size(static_cast<uint64_t>(std::max<int64_t>(width, 0)));
    indention = std::string(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  const std::vector<std::string> lines = pystr::splitlines(v.str() + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    // The first line only with first=True (even when empty); the others unless blank.
    if (i == 0 ? a.bool_or(1, false) : (a.bool_or(2, false) || !lines[i].empty())) out += indention;
    out += lines[i];
    ev.check_size(out.size());
  }
  return keep_markup(v, std::move(out));
}

Value f_truncate(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "truncate", {"length", "killwords", "end", "leeway"});
  if (!v.is_string()) {  // do_truncate measures and slices the value itself: only strings get cut
    if (length(v) <= a.int_or(0, 255) + a.int_or(3, 5)) return v;
    throw Failure("TypeError: can only concatenate " + type_name(v) + " (not \"str\") to " + type_name(v));
  }
  const std::string& s = v.str();
  const int64_t length = a.int_or(0, 255), leeway = a.int_or(3, 5);
  const std::string end = a.has(2) ? to_str(a.get(2)) : "...";
  const int64_t end_len = static_cast<int64_t>(pystr::length(end));
  if (length < end_len) throw Failure("AssertionError: expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) throw Failure("AssertionError: expected leeway >= 0, got " + std::to_string(leeway));
  const int64_t len = static_cast<int64_t>(pystr::length(s));
  if (len <= length + leeway) return v;
  std::string head = pystr::slice(s, pystr::adjust_slice(len, 0, length - end_len, 1));
  if (!a.bool_or(1, false)) {
    const std::string space = " ";
    head = pystr::rsplit(head, &space, 1)[0];
  }
  return Value::string(head + end);
}

Value f_wordcount(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "wordcount");
  const std::string s = to_str(v);
  int64_t words = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = pystr::decode(s, pos);
    const bool word = c == '_' || pystr::all_chars(pystr::encode(c), pystr::CharClass::alnum);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::integer(words);
}

Value f_format(Evaluator& ev, const Value& v, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    throw Failure("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  }
  Value params;
  if (!args.keyword.empty()) {
    auto dict = std::make_shared<DictData>();
    for (const auto& [key, value] : args.keyword) dict->set(Value::string(key), value);
    params = Value::make_dict(std::move(dict));
  } else {
    params = make_tuple(args.positional);
  }
  const Value fmt = soft_str(v);
  return keep_markup(fmt, percent_format(ev, fmt, params));
}

Value f_striptags(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "striptags");
  std::string s = to_str(v), out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t end = s.find("-->", i + 4);
      i = end == std::string::npos ? s.size() : end + 3;
    } else if (s[i] == '<' && s.find('>', i) != std::string::npos) {
      i = s.find('>', i) + 1;
    } else {
      out += s[i++];
    }
  }
  std::string joined;
  for (const std::string& word : pystr::split(out, nullptr, -1)) joined += (joined.empty() ? "" : " ") + word;
  for (const auto& [entity, ch] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&#39;", "'"}, {"&#34;", "\""},
                                   {"&quot;", "\""}, {"&amp;", "&"}}) {
    joined = pystr::replace(joined, entity, ch, -1);
  }
  return Value::string(std::move(joined));
}

// urllib.parse.quote of UTF-8 bytes, `safe` characters kept.
std::string url_quote(const std::string& s, bool for_query) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_query)) {
      out += ch;
    } else if (c == ' ' && for_query) {
      out += '+';
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

Value f_urlencode(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "urlencode");
  if (v.is_string()) return Value::string(url_quote(v.str(), false));
  if (!v.is_dict() && !v.is_list() && !(v.is_object() && v.object().is_iterator())) return Value::string(url_quote(to_str(v), false));
  std::vector<Value> pairs;
  if (v.is_dict()) {
    for (const auto& entry : v.dict().items()) pairs.push_back(make_tuple({entry.first, entry.second}));
  } else {
    pairs = iterate(ev, v);
  }
  std::string out;
  for (const Value& pair : pairs) {
    const std::vector<Value> kv = iterate(ev, pair);
    if (kv.size() != 2) throw Failure("ValueError: urlencode needs (key, value) pairs");
    out += (out.empty() ? "" : "&") + url_quote(to_str(kv[0]), true) + "=" + url_quote(to_str(kv[1]), true);
  }
  return Value::string(std::move(out));
}

Value f_xmlattr(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "xmlattr", {"autospace"});
  if (!v.is_dict()) throw Failure("AttributeError: xmlattr needs a mapping");
  std::string out;
  for (const auto& [key, value] : v.dict().items()) {
    if (value.is_none() || value.is_undefined()) continue;
    const std::string k = to_str(key);
    if (k.find_first_of(" \t\n\r\f/>=") != std::string::npos) throw Failure("ValueError: Invalid character in attribute name: " + repr_string(k));
    out += (out.empty() ? "" : " ") + escape_html(k) + "=\"" + escape_html(to_str(value)) + "\"";
  }
  if (a.bool_or(0, true) && !out.empty()) out = " " + out;
  return Value::string(std::move(out), true);
}

Value f_filesizeformat(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "filesizeformat", {"binary"});
  const double bytes = v.is_string() ? python_float(v.str()).value_or(NAN) : v.is_number() ? v.as_float() : NAN;
  if (std::isnan(bytes) && !(v.is_float())) throw Failure("ValueError: could not convert string to float: " + repr(v));
  const bool binary = a.bool_or(0, false);
  const double base = binary ? 1024 : 1000;
  static const char* const decimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* const iec[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value::string("1 Byte");
  if (bytes < base) return Value::string(int_str(static_cast<int64_t>(bytes)) + " Bytes");
  double unit = base;
  size_t i = 0;
  for (; i < 8; ++i) {
    unit *= base;
    if (bytes < unit) break;
  }
  i = std::min<size_t>(i, 7);
  return Value::string(format_spec(ev, Value::floating(base * bytes / unit), ".1f") + " " + (binary ? iec[i] : decimal[i]));
}

// --- numbers -------------------------------------------------------------------------------

Value f_int(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "int", {"default", "base"});
  const Value fallback = a.get_or(0, Value::integer(0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double f = std::trunc(v.as_float());
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    if (auto i = python_int(v.str(), a.int_or(1, 10))) return Value::integer(*i);
    if (auto f = python_float(v.str()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(std::trunc(*f)));
    }
  }
  return fallback;
}

Value f_float(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "float", {"default"});
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::floating(v.as_float());
  if (v.is_string()) {
    if (auto f = python_float(v.str())) return Value::floating(*f);
  }
  return a.get_or(0, Value::floating(0.0));
}

Value f_abs(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "abs");
  if (v.is_integral()) return v.as_int() < 0 ? negate(v) : Value::integer(v.as_int());
  if (v.is_float()) return Value::floating(std::fabs(v.as_float()));
  throw Failure("TypeError: bad operand type for abs(): '" + type_name(v) + "'");
}

// Python's round(x, n) for floats: the correctly rounded decimal (half to even), read back.
double round_float(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 330)), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "round", {"precision", "method"});
  const int64_t precision = a.int_or(0, 0);
  const std::string method = a.has(1) ? to_str(a.get(1)) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw Failure("FilterArgumentError: method must be common, ceil or floor");
  }
  if (!v.is_number()) {
    if (v.is_undefined()) fail_undefined(v);
    throw Failure("TypeError: type " + type_name(v) + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value::integer(v.as_int());
    return Value::floating(round_float(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = method == "ceil" ? std::ceil(v.as_float() * scale) : std::floor(v.as_float() * scale);
  return Value::floating(scaled / scale);
}

Value f_sum(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "sum", {"attribute", "start"});
  Value total = a.get_or(1, Value::integer(0));
  if (total.is_string()) throw Failure("TypeError: sum() can't sum strings [use ''.join(seq) instead]");
  const AttrGetter getter{attribute_parts(a.get_or(0, Value::none())), Value(), false};
  for (const Value& item : iterate(ev, v)) total = arithmetic(ev, BinaryOp::add, total, getter(item));
  return total;
}

Value min_or_max(Evaluator& ev, const Value& v, const CallArgs& args, const char* name, bool max) {
  ArgReader a(args, name, {"case_sensitive", "attribute"});
  const std::vector<Value> items = iterate(ev, v);
  if (items.empty()) return Value::undefined_hint("No aggregated item, sequence was empty.");
  const AttrGetter key{attribute_parts(a.get_or(1, Value::none())), Value(), !a.bool_or(0, false)};
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? less_than(best_key, k) : less_than(k, best_key)) best = i, best_key = std::move(k);
  }
  return items[best];
}
Value f_min(Evaluator& ev, const Value& v, const CallArgs& args) { return min_or_max(ev, v, args, "min", false); }
Value f_max(Evaluator& ev, const Value& v, const CallArgs& args) { return min_or_max(ev, v, args, "max", true); }

// --- sequences -----------------------------------------------------------------------------

Value f_length(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "length");
  return Value::integer(length(v));
}

Value f_list(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "list");
  return Value::make_list(iterate(ev, v));
}

Value f_first(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "first");
  std::optional<Value> item = ItemStream(v).next(ev);
  return item ? *item : Value::undefined_hint("No first item, sequence was empty.");
}

Value f_last(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "last");
  // reversed(): an Undefined has len() 0, so it reverses to nothing.
  if ((v.is_object() && v.object().is_iterator()) || v.is_none() || v.is_number()) {
    throw Failure("TypeError: '" + type_name(v) + "' object is not reversible");
  }
  const std::vector<Value> items = iterate(ev, v);
  return items.empty() ? Value::undefined_hint("No last item, sequence was empty.") : items.back();
}

Value f_join(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "join", {"d", "attribute"});
  const std::string sep = a.has(0) ? to_str(a.get(0)) : "";
  const AttrGetter getter{attribute_parts(a.get_or(1, Value::none())), Value(), false};
  std::string out;
  bool first = true;
  for (const Value& item : iterate(ev, v)) {
    if (!first) out += sep;
    first = false;
    append_str(out, getter(item));
    ev.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_default(Evaluator&, const Value& v, const CallArgs& args) {
  ArgReader a(args, "default", {"default_value", "boolean"});
  if (v.is_undefined() || (a.bool_or(1, false) && !truthy(v))) return a.get_or(0, Value::string(""));
  return v;
}

Value f_reverse(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "reverse");
  if (v.is_string()) return keep_markup(v, pystr::slice(v.str(), pystr::adjust_slice(static_cast<int64_t>(pystr::length(v.str())), std::nullopt, std::nullopt, -1)));
  if (v.is_list() || v.is_dict() || v.is_undefined()) {  // reversed(): a one-shot iterator over a snapshot
    auto items = std::make_shared<std::vector<Value>>(iterate(ev, v));
    std::reverse(items->begin(), items->end());
    auto pos = std::make_shared<size_t>(0);
    const std::string_view type = v.is_undefined() ? "reversed"
                                  : v.is_dict() ? "dict_reversekeyiterator"
                                  : v.list().flavor == ListFlavor::list ? "list_reverseiterator"
                                  : v.list().flavor == ListFlavor::range ? "range_iterator"
                                                                          : "reversed";
    return make_generator(ev, type, "", [items, pos](Evaluator&) -> std::optional<Value> {
      if (*pos >= items->size()) return std::nullopt;
      return (*items)[(*pos)++];
    });
  }
  if (v.is_object() && v.object().is_iterator()) {
    std::vector<Value> items = iterate(ev, v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  throw Failure("FilterArgumentError: argument must be iterable");
}

Value f_sort(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "sort", {"reverse", "case_sensitive", "attribute"});
  std::vector<Value> items = iterate(ev, v);
  const auto getters = multi_getters(a.get_or(2, Value::none()), !a.bool_or(1, false));
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(multi_key(getters, items[i]), i);
  const bool reverse = a.bool_or(0, false);
  ev.charge(items.size());
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> out;
  for (const auto& entry : keyed) out.push_back(items[entry.second]);
  return Value::make_list(std::move(out));
}

Value f_dictsort(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "dictsort", {"case_sensitive", "by", "reverse"});
  const std::string by = a.has(1) ? to_str(a.get(1)) : "key";
  if (by != "key" && by != "value") throw Failure("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) {
    if (v.is_undefined()) fail_undefined(v);
    throw Failure("AttributeError: '" + type_name(v) + "' object has no attribute 'items'");
  }
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.dict().items()) pairs.push_back(make_tuple({key, value}));
  const bool ignore_case = !a.bool_or(0, false), reverse = a.bool_or(2, false);
  const size_t pos = by == "key" ? 0 : 1;
  ev.charge(pairs.size());
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    Value kx = x.list().items[pos], ky = y.list().items[pos];
    if (ignore_case) kx = lower_if_string(kx), ky = lower_if_string(ky);
    return reverse ? less_than(ky, kx) : less_than(kx, ky);
  });
  return Value::make_list(std::move(pairs));
}

Value f_unique(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "unique", {"case_sensitive", "attribute"});
  const AttrGetter getter{attribute_parts(a.get_or(1, Value::none())), Value(), !a.bool_or(0, false)};
  auto stream = std::make_shared<ItemStream>(v);
  auto seen = std::make_shared<DictData>();
  return make_generator(ev, "generator", "sync_do_unique", [stream, seen, getter](Evaluator& e) -> std::optional<Value> {
    while (auto item = stream->next(e)) {
      Value key = getter(*item);
      if (seen->find(key)) continue;
      seen->set(std::move(key), Value::none());
      return item;
    }
    return std::nullopt;
  });
}

Value f_items(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "items");
  auto pos = std::make_shared<size_t>(0);
  return make_generator(ev, "generator", "do_items", [v, pos](Evaluator&) -> std::optional<Value> {
    if (v.is_undefined()) return std::nullopt;
    if (!v.is_dict()) throw Failure("TypeError: Can only get item pairs from a mapping.");
    if (*pos >= v.dict().size()) return std::nullopt;
    const auto& entry = v.dict().items()[(*pos)++];
    return make_tuple({entry.first, entry.second});
  });
}

Value f_batch(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "batch", {"linecount", "fill_with"});
  const int64_t count = to_index(a.get(0), "linecount");
  const Value fill = a.get_or(1, Value::none());
  auto stream = std::make_shared<ItemStream>(v);
  auto done = std::make_shared<bool>(false);
  return make_generator(ev, "generator", "do_batch", [stream, count, fill, done](Evaluator& e) -> std::optional<Value> {
    if (*done) return std::nullopt;
    std::vector<Value> batch;
    while (static_cast<int64_t>(batch.size()) != count) {
      auto item = stream->next(e);
      if (!item) break;
      batch.push_back(std::move(*item));
    }
    if (static_cast<int64_t>(batch.size()) != count) *done = true;
    if (batch.empty()) return std::nullopt;
    if (!fill.is_none() && static_cast<int64_t>(batch.size()) < count) {
      e.charge(static_cast<uint64_t>(count));
      batch.resize(static_cast<size_t>(count), fill);
    }
    return Value::make_list(std::move(batch));
  });
}

Value f_slice(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "slice", {"slices", "fill_with"});
  const int64_t slices = to_index(a.get(0), "slices");
  const Value fill = a.get_or(1, Value::none());
  auto seq = std::make_shared<std::vector<Value>>();
  auto number = std::make_shared<int64_t>(-1);
  Value source = v;
  ev.charge(static_cast<uint64_t>(std::max<int64_t>(slices, 0)));
  return make_generator(ev, "generator", "sync_do_slice", [seq, number, source, slices, fill](Evaluator& e) -> std::optional<Value> {
    if (*number < 0) {
      *seq = iterate(e, source);
      *number = 0;
    }
    if (slices == 0) throw Failure("ZeroDivisionError: integer division or modulo by zero");
    if (*number >= slices) return std::nullopt;
    const int64_t n = *number, len = static_cast<int64_t>(seq->size());
    const int64_t per = len / slices, extra = len % slices;
    const int64_t start = std::min(n, extra) + n * per, end = std::min(n + 1, extra) + (n + 1) * per;
    std::vector<Value> part(seq->begin() + start, seq->begin() + end);
    if (!fill.is_none() && n >= extra) part.push_back(fill);
    ++*number;
    return Value::make_list(std::move(part));
  });
}

Value f_groupby(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "groupby", {"attribute", "default", "case_sensitive"});
  const AttrGetter key{attribute_parts(a.get(0)), a.get_or(1, Value()), !a.bool_or(2, false)};
  const AttrGetter shown{attribute_parts(a.get(0)), a.get_or(1, Value()), false};
  std::vector<Value> items = iterate(ev, v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) keyed.emplace_back(key(item), item);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return less_than(x.first, y.first); });
  std::vector<Value> groups;
  for (size_t i = 0; i < keyed.size();) {
    std::vector<Value> members;
    size_t j = i;
    while (j < keyed.size() && equals(keyed[j].first, keyed[i].first)) members.push_back(keyed[j++].second);
    groups.push_back(make_tuple({shown(members[0]), Value::make_list(std::move(members))}));
    i = j;
  }
  return Value::make_list(std::move(groups));
}

// map / select / reject / selectattr / rejectattr: generators that check `if value:` and
// prepare their function when first pulled, as jinja2's generator functions do.
using ItemFn = std::function<std::optional<Value>(Evaluator&, const Value&)>;

Value lazy_filter(Evaluator& ev, const Value& v, std::string_view function, std::function<ItemFn()> prepare) {
  auto stream = std::make_shared<ItemStream>(v);
  auto fn = std::make_shared<ItemFn>();
  return make_generator(ev, "generator", function, [stream, fn, prepare, v](Evaluator& e) -> std::optional<Value> {
    if (!*fn) {
      if (!truthy(v)) return std::nullopt;
      *fn = prepare();
    }
    while (auto item = stream->next(e)) {
      if (auto out = (*fn)(e, *item)) return out;
    }
    return std::nullopt;
  });
}

CallArgs rest_of(const CallArgs& args, size_t skip) {
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(skip, args.positional.size())),
                         args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

Value f_map(Evaluator& ev, const Value& v, const CallArgs& args) {
  return lazy_filter(ev, v, "sync_do_map", [args]() -> ItemFn {
    if (args.positional.empty()) {
      AttrGetter getter;
      bool has_attribute = false;
      for (const auto& [key, value] : args.keyword) {
        if (key == "attribute") {
          getter.parts = attribute_parts(value);
          has_attribute = true;
        } else if (key == "default") {
          getter.fallback = value;
        } else {
          throw Failure("FilterArgumentError: Unexpected keyword argument " + repr_string(key));
        }
      }
      if (!has_attribute) throw Failure("FilterArgumentError: map requires a filter argument");
      return [getter](Evaluator&, const Value& item) { return std::optional<Value>(getter(item)); };
    }
    const std::string name = to_str(args.positional[0]);
    const CallArgs rest = rest_of(args, 1);
    return [name, rest](Evaluator& e, const Value& item) { return std::optional<Value>(e.call_filter(name, item, rest)); };
  });
}

Value select_or_reject(Evaluator& ev, const Value& v, const CallArgs& args, bool keep, bool by_attribute) {
  return lazy_filter(ev, v, "select_or_reject", [args, keep, by_attribute]() -> ItemFn {
    AttrGetter getter;
    if (by_attribute) {
      if (args.positional.empty()) throw Failure("FilterArgumentError: Missing parameter for attribute name");
      getter.parts = attribute_parts(args.positional[0]);
    }
    const size_t off = by_attribute ? 1 : 0;
    const bool has_test = args.positional.size() > off;
    const std::string name = has_test ? to_str(args.positional[off]) : "";
    const CallArgs rest = rest_of(args, off + 1);
    return [=](Evaluator& e, const Value& item) -> std::optional<Value> {
      const Value x = getter(item);
      const bool passed = has_test ? e.call_test(name, x, rest) : truthy(x);
      if (passed == keep) return item;
      return std::nullopt;
    };
  });
}
Value f_select(Evaluator& ev, const Value& v, const CallArgs& args) { return select_or_reject(ev, v, args, true, false); }
Value f_reject(Evaluator& ev, const Value& v, const CallArgs& args) { return select_or_reject(ev, v, args, false, false); }
Value f_selectattr(Evaluator& ev, const Value& v, const CallArgs& args) { return select_or_reject(ev, v, args, true, true); }
Value f_rejectattr(Evaluator& ev, const Value& v, const CallArgs& args) { return select_or_reject(ev, v, args, false, true); }

Value f_attr(Evaluator&, const Value& v, const CallArgs& args) {
  return get_attr_only(v, to_str(ArgReader(args, "attr", {"name"}).get(0)));
}

// --- output --------------------------------------------------------------------------------

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Value f_tojson(Evaluator& ev, const Value& v, const CallArgs& args) {
  ArgReader a(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  DumpOptions options;
  options.ensure_ascii = a.bool_or(0, false);
  options.sort_keys = a.bool_or(3, false);
  if (a.has(1) && !a.get(1).is_none()) {
    const Value& indent = a.get(1);
    if (indent.is_string()) {
      options.indent = indent.str();
    } else if (indent.is_integral()) {
      const int64_t width = std::max<int64_t>(indent.as_int(), 0);
      ev.check_size(static_cast<uint64_t>(width));
      options.indent = std::string(static_cast<size_t>(width), ' ');
    } else {
      throw Failure("TypeError: can't multiply sequence by non-int of type '" + type_name(indent) + "'");
    }
  }
  if (a.has(2) && !a.get(2).is_none()) {
    const std::vector<Value> seps = iterate(ev, a.get(2));
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      throw Failure("ValueError: separators must be a pair of strings");
    }
    options.item_separator = seps[0].str();
    options.key_separator = seps[1].str();
  }
  std::string out = dumps(v, options);
  ev.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_pprint(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "pprint");
  return Value::string(repr(v));
}

Value f_unsupported(Evaluator&, const Value&, const CallArgs&) {
  throw Failure("this filter is not supported by Ferry's renderer (its output is random or needs Python's textwrap/urlize)");
}

}  // namespace

bool filter_needs_context(std::string_view name) {
  return name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr" ||
         name == "random";
}

FilterFn find_filter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFn> filters = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
      {"capitalize", f_transform<pystr::capitalize>}, {"center", f_center}, {"count", f_length},
      {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},
      {"e", f_escape},          {"escape", f_escape},     {"filesizeformat", f_filesizeformat},
      {"first", f_first},       {"float", f_float},       {"forceescape", f_forceescape},
      {"format", f_format},     {"groupby", f_groupby},   {"indent", f_indent},
      {"int", f_int},           {"join", f_join},         {"last", f_last},
      {"length", f_length},     {"list", f_list},         {"lower", f_transform<pystr::lower>},
      {"items", f_items},       {"map", f_map},           {"min", f_min},
      {"max", f_max},           {"pprint", f_pprint},     {"random", f_unsupported},
      {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr}, {"slice", f_slice},
      {"sort", f_sort},         {"string", f_string},     {"striptags", f_striptags},
      {"sum", f_sum},           {"title", f_title},       {"trim", f_trim},
      {"truncate", f_truncate}, {"unique", f_unique},     {"upper", f_transform<pystr::upper>},
      {"urlencode", f_urlencode}, {"urlize", f_unsupported}, {"wordcount", f_wordcount},
      {"wordwrap", f_unsupported}, {"xmlattr", f_xmlattr}, {"tojson", f_tojson},
  };
  const auto it = filters.find(name);
  return it == filters.end() ? nullptr : it->second;
}

}  // namespace ferry::jinja
