// Python's str() and repr() of template values (see repr.h).
#include "src/tokenizer/jinja/repr.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/pystr.h"

namespace ferry::jinja {
namespace {

void append_escape(std::string& out, char32_t c) {
  char buf[16];
  if (c <= 0xFF) {
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
  } else if (c <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
  }
  out += buf;
}

// repr() nesting on this thread: objects (a namespace) print their contents through repr()
// again, so a value that holds itself is caught here rather than by each caller.
thread_local uint32_t repr_depth = 0;

struct ReprDepth {
  ReprDepth() {
    if (++repr_depth > kMaxValueDepth) {
      --repr_depth;
      throw Failure("RecursionError: maximum recursion depth exceeded in repr()", ErrorKind::limit);
    }
  }
  ~ReprDepth() { --repr_depth; }
};

void append_repr(std::string& out, const Value& v);

void append_items(std::string& out, const std::vector<Value>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i]);
  }
}

void append_list_repr(std::string& out, const ListData& list) {
  switch (list.flavor) {
    case ListFlavor::list:
      out += '[';
      append_items(out, list.items);
      out += ']';
      return;
    case ListFlavor::tuple:
      out += '(';
      append_items(out, list.items);
      out += list.items.size() == 1 ? ",)" : ")";
      return;
    case ListFlavor::range:
      out += "range(" + int_str(list.range_start) + ", " + int_str(list.range_stop);
      if (list.range_step != 1) out += ", " + int_str(list.range_step);
      out += ')';
      return;
    case ListFlavor::dict_items: out += "dict_items(["; break;
    case ListFlavor::dict_keys: out += "dict_keys(["; break;
    case ListFlavor::dict_values: out += "dict_values(["; break;
  }
  append_items(out, list.items);
  out += "])";
}

void append_dict_repr(std::string& out, const DictData& dict) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : dict.items()) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, key);
    out += ": ";
    append_repr(out, value);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v) {
  const ReprDepth guard;
  switch (v.kind()) {
    case Kind::undefined: out += "Undefined"; return;
    case Kind::string:
      if (v.is_markup()) {
        out += "Markup(" + repr_string(v.str()) + ")";
      } else {
        out += repr_string(v.str());
      }
      return;
    case Kind::list: append_list_repr(out, v.list()); return;
    case Kind::dict: append_dict_repr(out, v.dict()); return;
    case Kind::object: out += v.object().repr(); return;
    default: append_str(out, v); return;
  }
}

}  // namespace

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const char quote = has_single && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = pystr::decode(s, pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (pystr::is_printable(c)) {
      pystr::append(out, c);
    } else {
      append_escape(out, c);
    }
  }
  out += quote;
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));  // "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string out = sci[0] == '-' ? "-" : "";
  std::string digits;
  for (char ch : sci.substr(0, e)) {
    if (ch >= '0' && ch <= '9') digits += ch;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int decpt = exponent + 1;  // the value is 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string int_str(int64_t i) {
  char buf[24];
  const auto result = std::to_chars(buf, buf + sizeof buf, i);
  return std::string(buf, result.ptr);
}

std::string address_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return;
    case Kind::none: out += "None"; return;
    case Kind::boolean: out += v.as_bool() ? "True" : "False"; return;
    case Kind::integer: out += int_str(v.as_int()); return;
    case Kind::floating: out += float_repr(v.as_float()); return;
    case Kind::string: out += v.str(); return;
    default: append_repr(out, v); return;
  }
}

}  // namespace ferry::jinja
