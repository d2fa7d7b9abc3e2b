// Python's methods on str, list, tuple and dict (see methods.h).
#include "src/tokenizer/jinja/methods.h"

#include <algorithm>
#include <unordered_map>

#include "src/tokenizer/jinja/call_args.h"
#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"
#include "src/tokenizer/jinja/string_format.h"

namespace ferry::jinja {
namespace {

using Fn = BuiltinFunction::Fn;

Value str_result(const Value& self, std::string s) { return Value::string(std::move(s), self.is_markup()); }

// Python's start/end arguments of find, count, startswith...: negative counts from the end.
int64_t bound(const ArgReader& a, size_t i, int64_t fallback, int64_t length) {
  if (!a.has(i) || a.get(i).is_none()) return fallback;
  int64_t v = to_index(a.get(i), "slice indices");
  if (v < 0) v = std::max<int64_t>(v + length, 0);
  return v;
}

const std::string& str_arg(const ArgReader& a, size_t i, std::string_view what) {
  const Value& v = a.get(i);
  if (!v.is_string()) {
    throw Failure("TypeError: " + std::string(what) + " must be str, not " + type_name(v));
  }
  return v.str();
}

// --- str -----------------------------------------------------------------------------------

Value strip_like(const Value& self, const CallArgs& args, const char* name, bool left, bool right) {
  ArgReader a(args, name, {"chars"}, true);
  if (a.has(0) && !a.get(0).is_none() && !a.get(0).is_string()) {
    throw Failure(std::string("TypeError: ") + name + " arg must be None or str");
  }
  return str_result(self, pystr::strip(self.str(), left, right, a.string_or_null(0)));
}
Value s_strip(Evaluator&, const Value& s, const CallArgs& args) { return strip_like(s, args, "strip", true, true); }
Value s_lstrip(Evaluator&, const Value& s, const CallArgs& args) { return strip_like(s, args, "lstrip", true, false); }
Value s_rstrip(Evaluator&, const Value& s, const CallArgs& args) { return strip_like(s, args, "rstrip", false, true); }

Value split_like(const Value& self, const CallArgs& args, const char* name, bool reverse) {
  ArgReader a(args, name, {"sep", "maxsplit"});
  const std::string* sep = a.string_or_null(0);
  const int64_t maxsplit = a.int_or(1, -1);
  auto parts = reverse ? pystr::rsplit(self.str(), sep, maxsplit) : pystr::split(self.str(), sep, maxsplit);
  return make_string_list(std::move(parts), self.is_markup());
}
Value s_split(Evaluator&, const Value& s, const CallArgs& args) { return split_like(s, args, "split", false); }
Value s_rsplit(Evaluator&, const Value& s, const CallArgs& args) { return split_like(s, args, "rsplit", true); }

Value s_splitlines(Evaluator&, const Value& s, const CallArgs& args) {
  ArgReader a(args, "splitlines", {"keepends"});
  return make_string_list(pystr::splitlines(s.str(), a.bool_or(0, false)), s.is_markup());
}

// startswith / endswith: a str or a tuple of them, over s[start:end].
Value affix_test(const Value& self, const CallArgs& args, const char* name, bool at_end) {
  ArgReader a(args, name, {"prefix", "start", "end"}, true);
  const Value& affix = a.get(0);
  std::string_view s = self.str();
  std::string sliced;
  if (a.has(1) || a.has(2)) {
    const auto range = pystr::adjust_slice(static_cast<int64_t>(pystr::length(s)),
                                           a.has(1) && !a.get(1).is_none() ? std::optional(to_index(a.get(1), "slice indices")) : std::nullopt,
                                           a.has(2) && !a.get(2).is_none() ? std::optional(to_index(a.get(2), "slice indices")) : std::nullopt,
                                           std::nullopt);
    sliced = pystr::slice(s, range);
    s = sliced;
  }
  auto matches = [&](const Value& v) {
    if (!v.is_string()) {
      throw Failure(std::string("TypeError: ") + name + " first arg must be str or a tuple of str, not " + type_name(v));
    }
    const std::string& x = v.str();
    return x.size() <= s.size() && (at_end ? s.substr(s.size() - x.size()) == x : s.substr(0, x.size()) == x);
  };
  if (affix.is_list() && affix.list().flavor == ListFlavor::tuple) {
    return Value::boolean(std::any_of(affix.list().items.begin(), affix.list().items.end(), matches));
  }
  return Value::boolean(matches(affix));
}
Value s_startswith(Evaluator&, const Value& s, const CallArgs& args) { return affix_test(s, args, "startswith", false); }
Value s_endswith(Evaluator&, const Value& s, const CallArgs& args) { return affix_test(s, args, "endswith", true); }

Value s_replace(Evaluator& ev, const Value& s, const CallArgs& args) {
  ArgReader a(args, "replace", {"old", "new", "count"}, true);
  const std::string& old = str_arg(a, 0, "replace() argument 1");
  const Value& repl = a.get(1);
  if (!repl.is_string()) throw Failure("TypeError: replace() argument 2 must be str, not " + type_name(repl));
  const std::string repl_text = s.is_markup() ? markup_text(repl) : repl.str();
  std::string out = pystr::replace(s.str(), old, repl_text, a.int_or(2, -1));
  ev.check_size(out.size());
  return str_result(s, std::move(out));
}

// upper(), lower(), title(), ...: Markup stays Markup.
template <std::string (*transform)(std::string_view)>
Value s_transform(Evaluator&, const Value& s, const CallArgs& args) {
  expect_no_args(args, "the str method");
  return str_result(s, transform(s.str()));
}

// find / rfind / index / rindex / count over s[start:end].
int64_t search(const Value& s, const CallArgs& args, const char* name, bool reverse, bool count) {
  ArgReader a(args, name, {"sub", "start", "end"}, true);
  const std::string& sub = str_arg(a, 0, std::string(name) + "() argument");
  const int64_t len = static_cast<int64_t>(pystr::length(s.str()));
  const int64_t start = bound(a, 1, 0, len), end = bound(a, 2, len, len);
  return count ? pystr::count(s.str(), sub, start, end) : pystr::find(s.str(), sub, start, end, reverse);
}
Value s_find(Evaluator&, const Value& s, const CallArgs& args) { return Value::integer(search(s, args, "find", false, false)); }
Value s_rfind(Evaluator&, const Value& s, const CallArgs& args) { return Value::integer(search(s, args, "rfind", true, false)); }
Value s_count(Evaluator&, const Value& s, const CallArgs& args) { return Value::integer(search(s, args, "count", false, true)); }
Value index_or_fail(int64_t i) {
  if (i < 0) throw Failure("ValueError: substring not found");
  return Value::integer(i);
}
Value s_index(Evaluator&, const Value& s, const CallArgs& args) { return index_or_fail(search(s, args, "index", false, false)); }
Value s_rindex(Evaluator&, const Value& s, const CallArgs& args) { return index_or_fail(search(s, args, "rindex", true, false)); }

Value s_join(Evaluator& ev, const Value& s, const CallArgs& args) {
  ArgReader a(args, "join", {"iterable"}, true);
  const std::vector<Value> items = iterate(ev, a.get(0));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      throw Failure("TypeError: sequence item " + std::to_string(i) + ": expected str instance, " +
                    type_name(items[i]) + " found");
    }
    if (i) out += s.str();
    out += s.is_markup() ? markup_text(items[i]) : items[i].str();
    ev.check_size(out.size());
  }
  return str_result(s, std::move(out));
}

Value s_format(Evaluator& ev, const Value& s, const CallArgs& args) {
  return str_result(s, format_method(ev, s.str(), args));
}

// isdigit(), isalpha(), islower(), ...
template <bool (*predicate)(std::string_view)>
Value s_predicate(Evaluator&, const Value& s, const CallArgs& args) {
  expect_no_args(args, "the str method");
  return Value::boolean(predicate(s.str()));
}

template <pystr::CharClass cls>
bool all_of_class(std::string_view s) {
  return pystr::all_chars(s, cls);
}

// center / ljust / rjust: pad with fillchar to `width` characters.
Value pad(Evaluator& ev, const Value& s, const CallArgs& args, const char* name, int where) {
  ArgReader a(args, name, {"width", "fillchar"}, true);
  const int64_t width = to_index(a.get(0), "width");
  std::string fill = " ";
  if (a.has(1)) {
    fill = str_arg(a, 1, "The fill character");
    if (pystr::length(fill) != 1) throw Failure("TypeError: The fill character must be exactly one character long");
  }
  const int64_t len = static_cast<int64_t>(pystr::length(s.str()));
  if (width <= len) return s;
  const int64_t total = width - len;
  ev.check_size(static_cast<uint64_t>(total) * fill.size() + s.str().size());
  // Python's center puts the odd pad character on the right when len is even and width odd... as
  // `left = total / 2 + (total & width & 1)`.
  const int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s.str();
  for (int64_t i = left; i < total; ++i) out += fill;
  return str_result(s, std::move(out));
}
Value s_center(Evaluator& ev, const Value& s, const CallArgs& args) { return pad(ev, s, args, "center", 0); }
Value s_ljust(Evaluator& ev, const Value& s, const CallArgs& args) { return pad(ev, s, args, "ljust", -1); }
Value s_rjust(Evaluator& ev, const Value& s, const CallArgs& args) { return pad(ev, s, args, "rjust", 1); }

Value s_zfill(Evaluator& ev, const Value& s, const CallArgs& args) {
  ArgReader a(args, "zfill", {"width"}, true);
  const int64_t width = to_index(a.get(0), "width");
  const std::string& text = s.str();
  const int64_t len = static_cast<int64_t>(pystr::length(text));
  if (width <= len) return s;
  ev.check_size(static_cast<uint64_t>(width - len) + text.size());
  const bool sign = !text.empty() && (text[0] == '+' || text[0] == '-');
  std::string out = sign ? text.substr(0, 1) : "";
  out += std::string(static_cast<size_t>(width - len), '0');
  out += sign ? text.substr(1) : text;
  return str_result(s, std::move(out));
}

Value partition_like(const Value& s, const CallArgs& args, const char* name, bool reverse) {
  ArgReader a(args, name, {"sep"}, true);
  const std::string& sep = str_arg(a, 0, std::string(name) + "() argument");
  if (sep.empty()) throw Failure("ValueError: empty separator");
  const std::string& text = s.str();
  const size_t hit = reverse ? text.rfind(sep) : text.find(sep);
  std::vector<Value> parts;
  if (hit == std::string::npos) {
    parts = reverse ? std::vector<Value>{str_result(s, ""), str_result(s, ""), s}
                    : std::vector<Value>{s, str_result(s, ""), str_result(s, "")};
  } else {
    parts = {str_result(s, text.substr(0, hit)), str_result(s, sep), str_result(s, text.substr(hit + sep.size()))};
  }
  return make_tuple(std::move(parts));
}
Value s_partition(Evaluator&, const Value& s, const CallArgs& args) { return partition_like(s, args, "partition", false); }
Value s_rpartition(Evaluator&, const Value& s, const CallArgs& args) { return partition_like(s, args, "rpartition", true); }

Value s_removeprefix(Evaluator&, const Value& s, const CallArgs& args) {
  const std::string& p = str_arg(ArgReader(args, "removeprefix", {"prefix"}, true), 0, "removeprefix() argument");
  const std::string& t = s.str();
  return t.compare(0, p.size(), p) == 0 ? str_result(s, t.substr(p.size())) : s;
}

Value s_removesuffix(Evaluator&, const Value& s, const CallArgs& args) {
  const std::string& p = str_arg(ArgReader(args, "removesuffix", {"suffix"}, true), 0, "removesuffix() argument");
  const std::string& t = s.str();
  const bool ends = t.size() >= p.size() && t.compare(t.size() - p.size(), p.size(), p) == 0;
  return ends && !p.empty() ? str_result(s, t.substr(0, t.size() - p.size())) : s;
}

bool is_identifier(std::string_view t) {
  bool ok = !t.empty() && !(t[0] >= '0' && t[0] <= '9');
  for (size_t pos = 0; ok && pos < t.size();) {
    const char32_t c = pystr::decode(t, pos);
    ok = c == '_' || (c >= '0' && c <= '9') || pystr::all_chars(pystr::encode(c), pystr::CharClass::alpha);
  }
  return ok;
}

// --- list, tuple, dict ---------------------------------------------------------------------

Value l_count(Evaluator&, const Value& l, const CallArgs& args) {
  const Value& x = ArgReader(args, "count", {"value"}, true).get(0);
  return Value::integer(std::count_if(l.list().items.begin(), l.list().items.end(),
                                      [&](const Value& v) { return equals(v, x); }));
}

Value l_index(Evaluator&, const Value& l, const CallArgs& args) {
  ArgReader a(args, "index", {"value", "start", "stop"}, true);
  const auto& items = l.list().items;
  const int64_t len = static_cast<int64_t>(items.size());
  const int64_t start = bound(a, 1, 0, len), stop = std::min(bound(a, 2, len, len), len);
  for (int64_t i = start; i < stop; ++i) {
    if (equals(items[static_cast<size_t>(i)], a.get(0))) return Value::integer(i);
  }
  throw Failure(l.list().flavor == ListFlavor::tuple ? "ValueError: tuple.index(x): x not in tuple"
                                                     : "ValueError: " + repr(a.get(0)) + " is not in list");
}

Value same_value(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "copy");
  return v;  // values never change: a copy is the value itself
}

Value d_get(Evaluator&, const Value& d, const CallArgs& args) {
  ArgReader a(args, "get", {"key", "default"}, true);
  hash_value(a.get(0));  // an unhashable key is a TypeError
  const Value* v = d.dict().find(a.get(0));
  return v ? *v : a.get_or(1, Value::none());
}

Value dict_view(const Value& d, ListFlavor flavor) {
  std::vector<Value> items;
  items.reserve(d.dict().size());
  for (const auto& [key, value] : d.dict().items()) {
    if (flavor == ListFlavor::dict_items) items.push_back(make_tuple({key, value}));
    if (flavor == ListFlavor::dict_keys) items.push_back(key);
    if (flavor == ListFlavor::dict_values) items.push_back(value);
  }
  return Value::make_list(std::move(items), flavor);
}

Value d_items(Evaluator&, const Value& d, const CallArgs& args) {
  expect_no_args(args, "items");
  return dict_view(d, ListFlavor::dict_items);
}
Value d_keys(Evaluator&, const Value& d, const CallArgs& args) {
  expect_no_args(args, "keys");
  return dict_view(d, ListFlavor::dict_keys);
}
Value d_values(Evaluator&, const Value& d, const CallArgs& args) {
  expect_no_args(args, "values");
  return dict_view(d, ListFlavor::dict_values);
}

Value d_fromkeys(Evaluator& ev, const Value&, const CallArgs& args) {
  ArgReader a(args, "fromkeys", {"iterable", "value"}, true);
  auto dict = std::make_shared<DictData>();
  const Value value = a.get_or(1, Value::none());
  for (Value& key : iterate(ev, a.get(0))) dict->set(std::move(key), value);
  return Value::make_dict(std::move(dict));
}

struct MethodTable {
  std::unordered_map<std::string_view, Fn> methods;  // a null Fn: exists in Python, not implemented
  std::vector<std::string_view> unsafe;               // mutators the immutable sandbox refuses
};

const MethodTable& str_methods() {
  static const MethodTable table{
      {{"strip", s_strip}, {"lstrip", s_lstrip}, {"rstrip", s_rstrip}, {"split", s_split}, {"rsplit", s_rsplit},
       {"splitlines", s_splitlines}, {"startswith", s_startswith}, {"endswith", s_endswith},
       {"replace", s_replace}, {"upper", s_transform<pystr::upper>}, {"lower", s_transform<pystr::lower>},
       {"title", s_transform<pystr::title>}, {"capitalize", s_transform<pystr::capitalize>},
       {"swapcase", s_transform<pystr::swapcase>}, {"casefold", s_transform<pystr::casefold>}, {"find", s_find},
       {"rfind", s_rfind}, {"index", s_index}, {"rindex", s_rindex}, {"count", s_count}, {"join", s_join},
       {"format", s_format}, {"isdigit", s_predicate<all_of_class<pystr::CharClass::digit>>},
       {"isdecimal", s_predicate<all_of_class<pystr::CharClass::decimal>>},
       {"isnumeric", s_predicate<all_of_class<pystr::CharClass::numeric>>},
       {"isalpha", s_predicate<all_of_class<pystr::CharClass::alpha>>},
       {"isalnum", s_predicate<all_of_class<pystr::CharClass::alnum>>},
       {"isspace", s_predicate<all_of_class<pystr::CharClass::space>>},
       {"isascii", s_predicate<all_of_class<pystr::CharClass::ascii>>},
       {"isprintable", s_predicate<all_of_class<pystr::CharClass::printable>>},
       {"islower", s_predicate<pystr::is_lower>}, {"isupper", s_predicate<pystr::is_upper>},
       {"istitle", s_predicate<pystr::is_title>}, {"isidentifier", s_predicate<is_identifier>}, {"center", s_center}, {"ljust", s_ljust},
       {"rjust", s_rjust}, {"zfill", s_zfill}, {"partition", s_partition}, {"rpartition", s_rpartition},
       {"removeprefix", s_removeprefix}, {"removesuffix", s_removesuffix}, {"encode", nullptr},
       {"expandtabs", nullptr}, {"format_map", nullptr}, {"maketrans", nullptr}, {"translate", nullptr}},
      {}};
  return table;
}

const MethodTable& list_methods() {
  static const MethodTable table{{{"count", l_count}, {"index", l_index}, {"copy", same_value}},
                                 {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"}};
  return table;
}

const MethodTable& tuple_methods() {
  static const MethodTable table{{{"count", l_count}, {"index", l_index}}, {}};
  return table;
}

const MethodTable& dict_methods() {
  static const MethodTable table{{{"get", d_get}, {"items", d_items}, {"keys", d_keys}, {"values", d_values},
                                  {"copy", same_value}, {"fromkeys", d_fromkeys}},
                                 {"clear", "pop", "popitem", "setdefault", "update"}};
  return table;
}

const MethodTable* table_for(const Value& v) {
  if (v.is_string()) return &str_methods();
  if (v.is_dict()) return &dict_methods();
  if (v.is_list() && v.list().flavor == ListFlavor::list) return &list_methods();
  if (v.is_list() && (v.list().flavor == ListFlavor::tuple || v.list().flavor == ListFlavor::range)) return &tuple_methods();
  return nullptr;
}

}  // namespace

std::optional<Value> find_method(const Value& self, std::string_view name) {
  const MethodTable* table = table_for(self);
  if (!table) return std::nullopt;
  if (std::find(table->unsafe.begin(), table->unsafe.end(), name) != table->unsafe.end()) {
    return Value::undefined_hint("access to attribute " + repr_string(name) + " of " + repr_string(type_name(self)) +
                                     " object is unsafe.",
                                 true);
  }
  const auto it = table->methods.find(name);
  if (it == table->methods.end()) return std::nullopt;
  return Value::make_object(std::make_shared<BuiltinFunction>(it->first, it->second, self));
}

Value BuiltinFunction::call(Evaluator& ev, CallArgs& args) {
  if (!fn_) throw Failure("the Python method '" + std::string(name_) + "' is not supported by Ferry's renderer");
  return fn_(ev, self_, args);
}

std::string BuiltinFunction::repr() const {
  if (self_.is_undefined()) return "<built-in function " + std::string(name_) + ">";
  return "<built-in method " + std::string(name_) + " of " + ferry::jinja::type_name(self_) + " object at " +
         address_text(self_.identity()) + ">";
}

}  // namespace ferry::jinja
