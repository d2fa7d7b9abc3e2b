// Python's operators on template values (see operators.h).
#include "src/tokenizer/jinja/operators.h"

#include <cmath>
#include <limits>

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/methods.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"
#include "src/tokenizer/jinja/string_format.h"

namespace ferry::jinja {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::sub: return "-";
    case BinaryOp::mul: return "*";
    case BinaryOp::div: return "/";
    case BinaryOp::floordiv: return "//";
    case BinaryOp::mod: return "%";
    case BinaryOp::pow: return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  throw Failure("TypeError: unsupported operand type(s) for " + std::string(op_symbol(op)) + ": '" + type_name(a) +
                "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
  throw Failure("OverflowError: integer result beyond 64 bits (Ferry's template integers are 64-bit)");
}

int64_t int_floordiv(int64_t a, int64_t b) {
  if (b == 0) throw Failure("ZeroDivisionError: integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t int_mod(int64_t a, int64_t b) {
  if (b == 0) throw Failure("ZeroDivisionError: integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(double a, double b) {
  if (b == 0.0) throw Failure("ZeroDivisionError: float modulo");
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double float_floordiv(double a, double b) {
  if (b == 0.0) throw Failure("ZeroDivisionError: float floor division by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

int64_t int_pow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = checked_mul(result, base);
    exponent >>= 1;
    if (exponent > 0) base = checked_mul(base, base);
  }
  return result;
}

Value float_pow(double a, double b) {
  if (a == 0.0 && b < 0.0) throw Failure("ZeroDivisionError: 0.0 cannot be raised to a negative power");
  if (a < 0.0 && std::isfinite(b) && b != std::trunc(b)) {
    throw Failure("ValueError: a negative number to a fractional power is complex, which templates do not support");
  }
  const double r = std::pow(a, b);
  if (std::isinf(r) && std::isfinite(a) && std::isfinite(b)) {
    throw Failure("OverflowError: (34, 'Numerical result out of range')");
  }
  return Value::floating(r);
}

Value number_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case BinaryOp::add: return Value::integer(checked_add(x, y));
      case BinaryOp::sub:
        if (y == std::numeric_limits<int64_t>::min()) overflow();
        return Value::integer(checked_add(x, -y));
      case BinaryOp::mul: return Value::integer(checked_mul(x, y));
      case BinaryOp::div:
        if (y == 0) throw Failure("ZeroDivisionError: division by zero");
        return Value::floating(static_cast<double>(x) / static_cast<double>(y));
      case BinaryOp::floordiv: return Value::integer(int_floordiv(x, y));
      case BinaryOp::mod: return Value::integer(int_mod(x, y));
      case BinaryOp::pow:
        if (y < 0) return float_pow(static_cast<double>(x), static_cast<double>(y));
        return Value::integer(int_pow(x, y));
    }
  }
  const double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinaryOp::add: return Value::floating(x + y);
    case BinaryOp::sub: return Value::floating(x - y);
    case BinaryOp::mul: return Value::floating(x * y);
    case BinaryOp::div:
      if (y == 0.0) throw Failure("ZeroDivisionError: float division by zero");
      return Value::floating(x / y);
    case BinaryOp::floordiv: return Value::floating(float_floordiv(x, y));
    case BinaryOp::mod: return Value::floating(float_mod(x, y));
    case BinaryOp::pow: return float_pow(x, y);
  }
  return Value();
}

bool same_sequence_kind(const Value& a, const Value& b) {
  return a.is_list() && b.is_list() && a.list().flavor == b.list().flavor &&
         (a.list().flavor == ListFlavor::list || a.list().flavor == ListFlavor::tuple);
}

Value concatenate(Evaluator& ev, const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    ev.check_size(a.str().size() + b.str().size());
    if (a.is_markup() || b.is_markup()) return Value::string(markup_text(a) + markup_text(b), true);
    return Value::string(a.str() + b.str());
  }
  if (same_sequence_kind(a, b)) {
    ev.charge(a.list().items.size() + b.list().items.size());
    std::vector<Value> items = a.list().items;
    items.insert(items.end(), b.list().items.begin(), b.list().items.end());
    return Value::make_list(std::move(items), a.list().flavor);
  }
  if (a.is_string() || same_sequence_kind(a, a)) {
    const std::string kind = type_name(a);
    throw Failure("TypeError: can only concatenate " + kind + " (not \"" + type_name(b) + "\") to " + kind);
  }
  unsupported(BinaryOp::add, a, b);
}

// `count` copies of `unit` items or bytes, refused before anything is allocated when over a limit.
uint64_t repeated_size(uint64_t unit, int64_t times, uint64_t limit) {
  if (times <= 0 || unit == 0) return 0;
  if (static_cast<uint64_t>(times) > limit / unit) return limit + 1;
  return unit * static_cast<uint64_t>(times);
}

Value repeat(Evaluator& ev, const Value& seq, int64_t times) {
  if (seq.is_string()) {
    const uint64_t size = repeated_size(seq.str().size(), times, ev.limits().max_output_bytes);
    ev.check_size(size);
    std::string out;
    out.reserve(size);
    for (int64_t i = 0; size > 0 && i < times; ++i) out += seq.str();
    return Value::string(std::move(out), seq.is_markup());
  }
  const std::vector<Value>& items = seq.list().items;
  const uint64_t count = repeated_size(items.size(), times, ev.limits().max_steps);
  ev.charge(count);
  std::vector<Value> out;
  out.reserve(count);
  for (int64_t i = 0; count > 0 && i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::make_list(std::move(out), seq.list().flavor);
}

bool is_repeatable(const Value& v) {
  return v.is_string() ||
         (v.is_list() && (v.list().flavor == ListFlavor::list || v.list().flavor == ListFlavor::tuple));
}

[[noreturn]] void unorderable(const char* op, const Value& a, const Value& b) {
  throw Failure(std::string("TypeError: '") + op + "' not supported between instances of '" + type_name(a) +
                "' and '" + type_name(b) + "'");
}

// Python's rich comparison a OP b for an ordering operator (lt, le, gt, ge).
bool ordered(CompareOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  auto apply = [op](auto x, auto y) {
    switch (op) {
      case CompareOp::lt: return x < y;
      case CompareOp::le: return x <= y;
      case CompareOp::gt: return x > y;
      default: return x >= y;
    }
  };
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return apply(a.as_int(), b.as_int());
    const long double x = a.is_float() ? a.as_float() : static_cast<long double>(a.as_int());
    const long double y = b.is_float() ? b.as_float() : static_cast<long double>(b.as_int());
    return apply(x, y);
  }
  if (a.is_string() && b.is_string()) return apply(a.str().compare(b.str()), 0);
  if (same_sequence_kind(a, b)) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return ordered(op, x[i], y[i]);
    }
    return apply(x.size(), y.size());
  }
  const char* symbol = op == CompareOp::lt ? "<" : op == CompareOp::le ? "<=" : op == CompareOp::gt ? ">" : ">=";
  unorderable(symbol, a, b);
}

// sandbox.is_safe_attribute plus ImmutableSandboxedEnvironment's modifies_known_mutable.
Value unsafe_attribute(const Value& obj, std::string_view name) {
  return Value::undefined_hint("access to attribute " + repr_string(name) + " of " + repr_string(type_name(obj)) +
                                   " object is unsafe.",
                               true);
}

bool is_dunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

// getattr(obj, name) as Python would find it, before the sandbox looks at it; nullopt when
// Python raises AttributeError.
std::optional<Value> python_attribute(const Value& obj, std::string_view name) {
  if (is_dunder(name)) return unsafe_attribute(obj, name);  // every Python object has dunders
  if (obj.is_object()) {
    Value v = obj.object().attribute(name);
    if (v.is_undefined()) return std::nullopt;
    if (!name.empty() && name[0] == '_') return unsafe_attribute(obj, name);
    return v;
  }
  return find_method(obj, name);
}

// obj[key] as Python would do it; nullopt where Python raises TypeError or LookupError.
std::optional<Value> python_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
    return std::nullopt;
  }
  if (!indexable(obj) || !key.is_integral()) return std::nullopt;
  if (obj.is_string()) {
    const auto i = pystr::adjust_index(static_cast<int64_t>(pystr::length(obj.str())), key.as_int());
    if (!i) return std::nullopt;
    return Value::string(pystr::char_at(obj.str(), *i), obj.is_markup());
  }
  const auto& items = obj.list().items;
  const auto i = pystr::adjust_index(static_cast<int64_t>(items.size()), key.as_int());
  if (!i) return std::nullopt;
  return items[*i];
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_integral()) {
    throw Failure("TypeError: slice indices must be integers or None or have an __index__ method");
  }
  return v.as_int();
}

}  // namespace

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t to_index(const Value& v, std::string_view what) {
  if (!v.is_integral()) {
    throw Failure("TypeError: " + std::string(what) + " must be an integer, not '" + type_name(v) + "'");
  }
  return v.as_int();
}

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string markup_text(const Value& v) { return v.is_markup() ? v.str() : escape_html(to_str(v)); }

Value arithmetic(Evaluator& ev, BinaryOp op, const Value& a, const Value& b) {
  // str % x runs str.__mod__ first, which takes even an Undefined (it has __getitem__).
  if (op == BinaryOp::mod && a.is_string()) return Value::string(percent_format(ev, a, b), a.is_markup());
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return number_op(op, a, b);
  switch (op) {
    case BinaryOp::add: return concatenate(ev, a, b);
    case BinaryOp::mul:
      if (is_repeatable(a) && b.is_integral()) return repeat(ev, a, b.as_int());
      if (a.is_integral() && is_repeatable(b)) return repeat(ev, b, a.as_int());
      break;
    default: break;
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::floating(-v.as_float());
  if (v.is_undefined()) fail_undefined(v);
  throw Failure("TypeError: bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) return v;
  if (v.is_undefined()) fail_undefined(v);
  throw Failure("TypeError: bad operand type for unary +: '" + type_name(v) + "'");
}

bool compare(Evaluator& ev, CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::eq: return equals(a, b);
    case CompareOp::ne: return !equals(a, b);
    case CompareOp::in: return contains(ev, b, a);
    case CompareOp::not_in: return !contains(ev, b, a);
    default: return ordered(op, a, b);
  }
}

bool less_than(const Value& a, const Value& b) { return ordered(CompareOp::lt, a, b); }

bool contains(Evaluator& ev, const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::string:
      if (!item.is_string()) {
        throw Failure("TypeError: 'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::dict:
      hash_value(item);  // an unhashable key is a TypeError
      return container.dict().find(item) != nullptr;
    case Kind::list:
      for (const Value& v : container.list().items) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::undefined: return false;
    case Kind::object:
      if (container.object().is_iterator()) {
        while (auto v = container.object().next(ev)) {
          if (equals(*v, item)) return true;
        }
        return false;
      }
      break;
    default: break;
  }
  throw Failure("TypeError: argument of type '" + type_name(container) + "' is not iterable");
}

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto v = python_attribute(obj, name)) return *v;
  if (obj.is_dict()) {  // the common `message.content`, without building a key
    if (const Value* v = obj.dict().find(name)) return *v;
    return Value::undefined_attribute(obj, name);
  }
  if (auto v = python_item(obj, Value::string(std::string(name)))) return *v;
  return Value::undefined_attribute(obj, name);
}

Value get_attr_only(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto v = python_attribute(obj, name)) return *v;
  return Value::undefined_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && key.is_string()) {  // the common `message['role']`
    if (const Value* v = obj.dict().find(std::string_view(key.str()))) return *v;
  }
  if (auto v = python_item(obj, key)) return *v;
  if (key.is_string()) {
    if (auto v = python_attribute(obj, key.str())) return *v;
    return Value::undefined_attribute(obj, key.str());
  }
  auto data = std::make_shared<UndefinedData>();
  data->form = UndefinedData::Form::hint;
  data->name = type_name(obj) + " object has no element " + repr(key);
  return Value::make_undefined(std::move(data));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!indexable(obj)) throw Failure("TypeError: '" + type_name(obj) + "' object is not subscriptable");
  if (obj.is_string()) {
    const auto range = pystr::adjust_slice(static_cast<int64_t>(pystr::length(obj.str())), slice_bound(start),
                                           slice_bound(stop), slice_bound(step));
    return Value::string(pystr::slice(obj.str(), range), obj.is_markup());
  }
  const auto& items = obj.list().items;
  const auto range =
      pystr::adjust_slice(static_cast<int64_t>(items.size()), slice_bound(start), slice_bound(stop), slice_bound(step));
  if (obj.list().flavor == ListFlavor::range) {  // a range's slice is a range
    const ListData& r = obj.list();
    const int64_t start = r.range_start + range.start * r.range_step, step = r.range_step * range.step;
    return Value::make_range(start, start + range.count * step, step);
  }
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(range.count));
  for (int64_t k = 0, i = range.start; k < range.count; ++k, i += range.step) out.push_back(items[static_cast<size_t>(i)]);
  return Value::make_list(std::move(out), obj.list().flavor);
}

std::vector<Value> iterate(Evaluator& ev, const Value& v) {
  std::vector<Value> items;
  switch (v.kind()) {
    case Kind::undefined: return items;
    case Kind::list: items = v.list().items; break;
    case Kind::dict:
      items.reserve(v.dict().size());
      for (const auto& entry : v.dict().items()) items.push_back(entry.first);
      break;
    case Kind::string:
      for (size_t pos = 0; pos < v.str().size();) {
        const size_t from = pos;
        pystr::decode(v.str(), pos);
        items.push_back(Value::string(v.str().substr(from, pos - from)));
      }
      break;
    case Kind::object:
      if (v.object().is_iterator()) {
        while (auto item = v.object().next(ev)) {
          ev.charge(1);
          items.push_back(std::move(*item));
        }
        return items;
      }
      [[fallthrough]];
    default: throw Failure("TypeError: '" + type_name(v) + "' object is not iterable");
  }
  ev.charge(items.size());
  return items;
}

std::optional<int64_t> length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(pystr::length(v.str()));
    case Kind::list: return static_cast<int64_t>(v.list().items.size());
    case Kind::dict: return static_cast<int64_t>(v.dict().size());
    default: return std::nullopt;
  }
}

int64_t length(const Value& v) {
  if (auto n = length_of(v)) return *n;
  throw Failure("TypeError: object of type '" + type_name(v) + "' has no len()");
}

}  // namespace ferry::jinja
