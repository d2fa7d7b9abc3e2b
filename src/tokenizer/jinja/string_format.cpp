// Python's printf-style `%` formatting, str.format and format specs (see string_format.h).
#include "src/tokenizer/jinja/string_format.h"

#include <cmath>
#include <cstdio>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/operators.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

// Digits of |v| in `base` (2, 8, 10, 16), upper-case hex when asked.
std::string digits_of(int64_t v, int base, bool upper) {
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (u == 0) return "0";
  std::string out;
  const char* set = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  while (u) {
    out.insert(out.begin(), set[u % static_cast<uint64_t>(base)]);
    u /= static_cast<uint64_t>(base);
  }
  return out;
}

std::string group_digits(const std::string& digits, char sep, size_t every) {
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % every == 0) out += sep;
    out += digits[i];
  }
  return out;
}

// Pads `body` (after sign/prefix `head`) to `width` characters.
std::string pad(Evaluator& ev, const std::string& head, const std::string& body, int64_t width, char align,
                const std::string& fill) {
  const int64_t len = static_cast<int64_t>(pystr::length(head) + pystr::length(body));
  if (width <= len) return head + body;
  const int64_t total = width - len;
  ev.check_size(static_cast<uint64_t>(total) * fill.size() + head.size() + body.size());
  auto repeat = [&](int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += fill;
    return s;
  };
  switch (align) {
    case '<': return head + body + repeat(total);
    case '^': return repeat(total / 2) + head + body + repeat(total - total / 2);
    case '=': return head + repeat(total) + body;
    default: return repeat(total) + head + body;
  }
}

double real_of(const Value& v, char conversion) {
  if (v.is_number()) return v.as_float();
  if (v.is_undefined()) fail_undefined(v);
  throw Failure(std::string("TypeError: %") + conversion + " format: a real number is required, not " + type_name(v));
}

int64_t integer_of(const Value& v, char conversion) {
  if (v.is_integral()) return v.as_int();
  if (v.is_float() && (conversion == 'd' || conversion == 'i' || conversion == 'u')) {
    const double f = std::trunc(v.as_float());
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) throw Failure("OverflowError: cannot convert float to integer");
    return static_cast<int64_t>(f);
  }
  if (v.is_undefined()) fail_undefined(v);
  if (conversion == 'd' || conversion == 'i' || conversion == 'u') real_of(v, conversion);
  throw Failure(std::string("TypeError: %") + conversion + " format: an integer is required, not " + type_name(v));
}

std::string c_float(Evaluator& ev, double v, const std::string& flags, int64_t width, int64_t precision, char type) {
  ev.check_size(static_cast<uint64_t>(std::max<int64_t>(width, 0)) + static_cast<uint64_t>(std::max<int64_t>(precision, 0)));
  std::string spec = "%" + flags;
  if (width > 0) spec += std::to_string(width);
  if (precision >= 0) spec += "." + std::to_string(precision);
  spec += type;
  std::string out(static_cast<size_t>(std::max<int64_t>(width, 0) + std::max<int64_t>(precision, 0) + 400), '\0');
  const int n = std::snprintf(out.data(), out.size(), spec.c_str(), v);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// One `%` conversion of printf-style formatting.
struct PercentSpec {
  std::string flags;
  int64_t width = -1, precision = -1;
  char conversion = 's';
  bool has(char flag) const { return flags.find(flag) != std::string::npos; }
};

std::string convert_percent(Evaluator& ev, const Value& v, const PercentSpec& spec, bool markup) {
  const char c = spec.conversion;
  const char align = spec.has('-') ? '<' : '>';
  if (c == 's' || c == 'r' || c == 'a') {
    std::string text = c == 's' ? (markup ? markup_text(v) : to_str(v)) : repr(v);
    if (spec.precision >= 0) text = pystr::slice(text, pystr::adjust_slice(static_cast<int64_t>(pystr::length(text)), 0, spec.precision, 1));
    return pad(ev, "", text, spec.width, align, " ");
  }
  if (c == 'c') {
    std::string ch;
    if (v.is_integral()) {
      if (v.as_int() < 0 || v.as_int() > 0x10FFFF) throw Failure("OverflowError: %c arg not in range(0x110000)");
      ch = pystr::encode(static_cast<char32_t>(v.as_int()));
    } else if (v.is_string() && pystr::length(v.str()) == 1) {
      ch = v.str();
    } else {
      throw Failure("TypeError: %c requires int or char");
    }
    return pad(ev, "", ch, spec.width, align, " ");
  }
  if (c == 'e' || c == 'E' || c == 'f' || c == 'F' || c == 'g' || c == 'G') {
    return c_float(ev, real_of(v, c), spec.flags, spec.width, spec.precision < 0 ? 6 : spec.precision, c);
  }
  const int64_t n = integer_of(v, c);
  const int base = c == 'o' ? 8 : (c == 'x' || c == 'X') ? 16 : 10;
  std::string digits = digits_of(n, base, c == 'X');
  if (spec.precision > static_cast<int64_t>(digits.size())) {
    ev.check_size(static_cast<uint64_t>(spec.precision));
    digits.insert(0, static_cast<size_t>(spec.precision) - digits.size(), '0');
  }
  std::string head = n < 0 ? "-" : spec.has('+') ? "+" : spec.has(' ') ? " " : "";
  if (spec.has('#') && base != 10) head += c == 'o' ? "0o" : c == 'x' ? "0x" : "0X";
  const bool zeros = spec.has('0') && !spec.has('-');
  return pad(ev, head, digits, spec.width, zeros ? '=' : align, zeros ? "0" : " ");
}

class PercentFormatter {
 public:
  PercentFormatter(Evaluator& ev, const Value& fmt, const Value& args) : ev_(ev), fmt_(fmt.str()), markup_(fmt.is_markup()) {
    tuple_ = args.is_list() && args.list().flavor == ListFlavor::tuple;
    if (tuple_) {
      positional_ = args.list().items;
    } else {
      positional_ = {args};
      if (args.is_dict()) mapping_ = &args.dict();
    }
    dict_like_ = !tuple_ && (args.is_dict() || args.is_list() || args.is_undefined());  // PyMapping_Check
  }

  std::string run() {
    for (size_t i = 0; i < fmt_.size();) {
      const size_t pct = fmt_.find('%', i);
      out_.append(fmt_, i, pct == std::string::npos ? std::string::npos : pct - i);
      if (pct == std::string::npos) break;
      i = conversion(pct + 1);
      ev_.check_size(out_.size());
    }
    if (next_ < positional_.size() && !dict_like_) {
      throw Failure("TypeError: not all arguments converted during string formatting");
    }
    return std::move(out_);
  }

 private:
  char at(size_t i) const {
    if (i >= fmt_.size()) throw Failure("ValueError: incomplete format");
    return fmt_[i];
  }

  const Value& take() {
    if (next_ >= positional_.size()) throw Failure("TypeError: not enough arguments for format string");
    return positional_[next_++];
  }

  int64_t number(size_t& i) {
    if (at(i) == '*') {
      ++i;
      return to_index(take(), "* wants int");
    }
    int64_t n = 0;
    while (i < fmt_.size() && fmt_[i] >= '0' && fmt_[i] <= '9') n = checked_add(checked_mul(n, 10), fmt_[i++] - '0');
    return n;
  }

  // Parses and writes the conversion whose '%' ends at i; returns the index after it.
  size_t conversion(size_t i) {
    const Value* keyed = nullptr;
    if (at(i) == '(') {
      size_t depth = 1, j = i + 1;
      while (depth && j < fmt_.size()) depth += fmt_[j] == '(' ? 1 : fmt_[j] == ')' ? -1 : 0, ++j;
      if (depth) throw Failure("ValueError: incomplete format key");
      if (!mapping_) throw Failure("TypeError: format requires a mapping");
      const std::string key = fmt_.substr(i + 1, j - i - 2);
      keyed = mapping_->find(key);
      if (!keyed) throw Failure("KeyError: " + repr_string(key));
      i = j;
    }
    PercentSpec spec;
    while (std::string_view("-+ #0").find(at(i)) != std::string_view::npos) spec.flags += fmt_[i++];
    if (at(i) == '*' || (at(i) >= '0' && at(i) <= '9')) spec.width = number(i);
    if (at(i) == '.') {
      ++i;
      spec.precision = number(i);
    }
    while (at(i) == 'h' || at(i) == 'l' || at(i) == 'L') ++i;
    spec.conversion = at(i);
    if (spec.conversion == '%') {
      out_ += '%';
      return i + 1;
    }
    if (std::string_view("diuoxXeEfFgGcrsa").find(spec.conversion) == std::string_view::npos) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "ValueError: unsupported format character '%c' (0x%x) at index %zu",
                    spec.conversion, static_cast<unsigned char>(spec.conversion), i);
      throw Failure(buf);
    }
    out_ += convert_percent(ev_, keyed ? *keyed : take(), spec, markup_);
    return i + 1;
  }

  Evaluator& ev_;
  const std::string& fmt_;
  bool markup_, tuple_ = false, dict_like_ = false;
  std::vector<Value> positional_;
  const DictData* mapping_ = nullptr;
  size_t next_ = 0;
  std::string out_;
};

// The parts of a format spec: [[fill]align][sign][z][#][0][width][,|_][.precision][type].
struct Spec {
  std::string fill = " ";
  char align = 0, sign = 0, grouping = 0, type = 0;
  bool alternate = false, zero = false;
  int64_t width = -1, precision = -1;
};

Spec parse_spec(std::string_view s) {
  Spec spec;
  size_t i = 0, first = 0;
  if (!s.empty()) pystr::decode(s, first);
  if (first < s.size() && std::string_view("<>=^").find(s[first]) != std::string_view::npos) {
    spec.fill = std::string(s.substr(0, first));
    spec.align = s[first];
    i = first + 1;
  } else if (!s.empty() && std::string_view("<>=^").find(s[0]) != std::string_view::npos) {
    spec.align = s[i++];
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == 'z') ++i;
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') spec.zero = true, ++i;
  auto number = [&](int64_t& into) {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return;
    into = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') into = checked_add(checked_mul(into, 10), s[i++] - '0');
  };
  number(spec.width);
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    number(spec.precision);
    if (spec.precision < 0) throw Failure("ValueError: Format specifier missing precision");
  }
  if (i < s.size()) spec.type = s[i++];
  if (i < s.size()) throw Failure("ValueError: Invalid format specifier");
  if (spec.zero && !spec.align) {
    spec.fill = "0";
    spec.align = '=';
  }
  return spec;
}

[[noreturn]] void unknown_code(const Spec& spec, const Value& v) {
  throw Failure(std::string("ValueError: Unknown format code '") + spec.type + "' for object of type '" + type_name(v) + "'");
}

std::string format_float(Evaluator& ev, double f, const Spec& spec, const Value& v) {
  char type = spec.type;
  std::string body;
  if (type == 0 && spec.precision < 0) {
    body = float_repr(std::fabs(f));
  } else if (type == 0 || std::string_view("eEfFgG%").find(type) != std::string_view::npos) {
    const int64_t precision = spec.precision < 0 ? 6 : spec.precision;
    const double x = type == '%' ? std::fabs(f) * 100 : std::fabs(f);
    const std::string flags = spec.alternate ? "#" : "";
    body = c_float(ev, x, flags, -1, type == 0 && precision == 0 ? 1 : precision,
                   type == 0 ? 'g' : type == '%' ? 'f' : type);
    if (type == 0 && body.find_first_of(".einf") == std::string::npos) body += ".0";
    if (type == '%') body += '%';
  } else {
    unknown_code(spec, v);
  }
  if (spec.grouping) {
    const size_t int_end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, int_end), spec.grouping, 3) + (int_end == std::string::npos ? "" : body.substr(int_end));
  }
  const std::string head = std::signbit(f) && !std::isnan(f) ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
  return pad(ev, head, body, spec.width, spec.align ? spec.align : '>', spec.fill);
}

std::string format_int(Evaluator& ev, int64_t n, const Spec& spec, const Value& v) {
  if (spec.type && std::string_view("eEfFgG%").find(spec.type) != std::string_view::npos) {
    return format_float(ev, static_cast<double>(n), spec, v);
  }
  if (spec.precision >= 0) throw Failure("ValueError: Precision not allowed in integer format specifier");
  if (spec.type == 'c') return pad(ev, "", pystr::encode(static_cast<char32_t>(n)), spec.width, spec.align ? spec.align : '<', spec.fill);
  const int base = spec.type == 'b' ? 2 : spec.type == 'o' ? 8 : (spec.type == 'x' || spec.type == 'X') ? 16 : 10;
  if (spec.type && base == 10 && spec.type != 'd' && spec.type != 'n') unknown_code(spec, v);
  std::string digits = digits_of(n, base, spec.type == 'X');
  if (spec.grouping) digits = group_digits(digits, spec.grouping, base == 10 ? 3 : 4);
  std::string head = n < 0 ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
  if (spec.alternate && base != 10) head += spec.type == 'b' ? "0b" : spec.type == 'o' ? "0o" : spec.type == 'x' ? "0x" : "0X";
  return pad(ev, head, digits, spec.width, spec.align ? spec.align : '>', spec.fill);
}

// str.format's replacement fields, with the sandbox's lookups for `{0.attr}` and `{0[key]}`.
class BraceFormatter {
 public:
  BraceFormatter(Evaluator& ev, const CallArgs& args) : ev_(ev), args_(args) {}

  std::string format(std::string_view fmt, int depth) {
    if (depth > 2) throw Failure("ValueError: Max string recursion exceeded");
    std::string out;
    for (size_t i = 0; i < fmt.size();) {
      const char c = fmt[i];
      if (c == '}') {
        if (i + 1 >= fmt.size() || fmt[i + 1] != '}') throw Failure("ValueError: Single '}' encountered in format string");
        out += '}', i += 2;
      } else if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
        out += '{', i += 2;
      } else if (c == '{') {
        size_t j = i + 1, level = 1;
        while (j < fmt.size() && level) level += fmt[j] == '{' ? 1 : fmt[j] == '}' ? -1 : 0, ++j;
        if (level) throw Failure("ValueError: expected '}' before end of string");
        out += field(fmt.substr(i + 1, j - i - 2), depth);
        i = j;
      } else {
        out += c, ++i;
      }
      ev_.check_size(out.size());
    }
    return out;
  }

 private:
  std::string field(std::string_view text, int depth) {
    size_t end = 0;
    while (end < text.size() && text[end] != '!' && text[end] != ':') end += text[end] == '[' ? text.substr(end).find(']') + 1 : 1;
    end = std::min(end, text.size());
    Value v = resolve(text.substr(0, end));
    std::string_view rest = text.substr(end);
    if (!rest.empty() && rest[0] == '!') {
      if (rest.size() < 2) throw Failure("ValueError: end of string while looking for conversion specifier");
      const char conv = rest[1];
      if (conv == 'r' || conv == 'a') {
        v = Value::string(repr(v));
      } else if (conv == 's') {
        v = Value::string(to_str(v));
      } else {
        throw Failure(std::string("ValueError: Unknown conversion specifier ") + conv);
      }
      rest = rest.substr(2);
    }
    std::string spec;
    if (!rest.empty() && rest[0] == ':') spec = format(rest.substr(1), depth + 1);
    return format_spec(ev_, v, spec);
  }

  Value argument(std::string_view name) {
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
      size_t index = auto_index_;
      if (name.empty()) {
        if (numbering_ == 2) throw Failure("ValueError: cannot switch from manual field specification to automatic field numbering");
        numbering_ = 1;
        ++auto_index_;
      } else {
        if (numbering_ == 1) throw Failure("ValueError: cannot switch from automatic field numbering to manual field specification");
        numbering_ = 2;
        index = static_cast<size_t>(std::stoull(std::string(name)));
      }
      if (index >= args_.positional.size()) throw Failure("IndexError: Replacement index " + std::to_string(index) + " out of range for positional args tuple");
      return args_.positional[index];
    }
    for (const auto& [key, value] : args_.keyword) {
      if (key == name) return value;
    }
    throw Failure("KeyError: " + repr_string(name));
  }

  Value resolve(std::string_view name) {
    const size_t first_end = std::min(name.find('.'), name.find('['));
    Value v = argument(name.substr(0, first_end));
    for (size_t i = first_end; i < name.size();) {
      if (name[i] == '.') {
        const size_t end = std::min(name.find('.', i + 1), name.find('[', i + 1));
        v = get_attr(v, name.substr(i + 1, end - i - 1));
        i = end;
      } else if (name[i] == '[') {
        const size_t close = name.find(']', i);
        if (close == std::string_view::npos) throw Failure("ValueError: Missing ']' in format string");
        const std::string key(name.substr(i + 1, close - i - 1));
        const bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = get_item(v, digits ? Value::integer(std::stoll(key)) : Value::string(key));
        i = close + 1;
      } else {
        throw Failure("ValueError: Only '.' or '[' may follow ']' in format field specifier");
      }
    }
    return v;
  }

  Evaluator& ev_;
  const CallArgs& args_;
  size_t auto_index_ = 0;
  int numbering_ = 0;  // 1: automatic {}, 2: manual {0}
};

}  // namespace

std::string percent_format(Evaluator& ev, const Value& fmt, const Value& args) {
  return PercentFormatter(ev, fmt, args).run();
}

std::string format_method(Evaluator& ev, std::string_view fmt, const CallArgs& args) {
  return BraceFormatter(ev, args).format(fmt, 0);
}

std::string format_spec(Evaluator& ev, const Value& value, std::string_view spec_text) {
  if (spec_text.empty()) return to_str(value);
  const Spec spec = parse_spec(spec_text);
  if (value.is_integral()) return format_int(ev, value.as_int(), spec, value);
  if (value.is_float()) return format_float(ev, value.as_float(), spec, value);
  if (!value.is_string()) {
    throw Failure("TypeError: unsupported format string passed to " + type_name(value) + ".__format__");
  }
  if (spec.type && spec.type != 's') unknown_code(spec, value);
  if (spec.sign) throw Failure("ValueError: Sign not allowed in string format specifier");
  if (spec.align == '=') throw Failure("ValueError: '=' alignment not allowed in string format specifier");
  std::string text = value.str();
  if (spec.precision >= 0) {
    text = pystr::slice(text, pystr::adjust_slice(static_cast<int64_t>(pystr::length(text)), 0, spec.precision, 1));
  }
  return pad(ev, "", text, spec.width, spec.align ? spec.align : '<', spec.fill);
}

}  // namespace ferry::jinja
