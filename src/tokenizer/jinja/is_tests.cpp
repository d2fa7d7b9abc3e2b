// Jinja's tests (jinja2/tests.py), as Python evaluates them on template values.
#include "src/tokenizer/jinja/is_tests.h"

#include <unordered_map>

#include "src/tokenizer/jinja/call_args.h"
#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/filters.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

// Tests of the value alone (`x is string`): jinja2's test_* functions.
bool defined(const Value& v) { return !v.is_undefined(); }
bool undefined(const Value& v) { return v.is_undefined(); }
bool none(const Value& v) { return v.is_none(); }
bool boolean(const Value& v) { return v.is_bool(); }
bool true_(const Value& v) { return v.is_bool() && v.as_bool(); }
bool false_(const Value& v) { return v.is_bool() && !v.as_bool(); }
bool integer(const Value& v) { return v.is_int(); }  // not bool, although bool is an int subclass
bool floating(const Value& v) { return v.is_float(); }
bool number(const Value& v) { return v.is_number(); }
bool string(const Value& v) { return v.is_string(); }
bool mapping(const Value& v) { return v.is_dict(); }
// len() works and __getitem__ exists: str, list, tuple, range, dict (not views or generators).
bool sequence(const Value& v) { return indexable(v) || v.is_dict(); }
bool iterable(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || (v.is_object() && v.object().is_iterator());
}
bool callable(const Value& v) { return v.is_undefined() || (v.is_object() && v.object().callable()); }  // Undefined has __call__
bool escaped(const Value& v) { return v.is_markup(); }
bool lower(const Value& v) { return pystr::is_lower(to_str(v)); }
bool upper(const Value& v) { return pystr::is_upper(to_str(v)); }
bool filter(const Value& v) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool test(const Value& v) { return v.is_string() && find_test(v.str()) != nullptr; }

template <bool (*predicate)(const Value&)>
bool of_value(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "the test");
  return predicate(v);
}

// The single argument of a two-operand test (`x is eq 3`, `x is divisibleby(3)`).
const Value& other(const CallArgs& args, std::string_view test) { return ArgReader(args, test, {"other"}).get(0); }

// Python's `is`: the same object. Small ints, None and the bools are single objects in CPython.
bool is_sameas(Evaluator&, const Value& v, const CallArgs& args) {
  const Value& o = other(args, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::none: return true;
    case Kind::boolean: return v.as_bool() == o.as_bool();
    case Kind::integer: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Kind::floating: return false;
    default: return v.identity() == o.identity();
  }
}

// value % by == remainder (odd, even, divisibleby).
bool remainder_is(Evaluator& ev, const Value& v, const Value& by, int64_t remainder) {
  return equals(arithmetic(ev, BinaryOp::mod, v, by), Value::integer(remainder));
}

bool is_odd(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "odd");
  return remainder_is(ev, v, Value::integer(2), 1);
}

bool is_even(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "even");
  return remainder_is(ev, v, Value::integer(2), 0);
}

bool is_divisibleby(Evaluator& ev, const Value& v, const CallArgs& args) {
  return remainder_is(ev, v, ArgReader(args, "divisibleby", {"num"}).get(0), 0);
}

bool is_in(Evaluator& ev, const Value& v, const CallArgs& args) {
  return contains(ev, ArgReader(args, "in", {"seq"}).get(0), v);
}

template <CompareOp op>
bool compares(Evaluator& ev, const Value& v, const CallArgs& args) {
  return compare(ev, op, v, other(args, "compare"));
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> tests = {
      {"defined", of_value<defined>},   {"undefined", of_value<undefined>}, {"none", of_value<none>},
      {"boolean", of_value<boolean>},   {"true", of_value<true_>},          {"false", of_value<false_>},
      {"integer", of_value<integer>},   {"float", of_value<floating>},      {"number", of_value<number>},
      {"string", of_value<string>},     {"mapping", of_value<mapping>},     {"sequence", of_value<sequence>},
      {"iterable", of_value<iterable>}, {"callable", of_value<callable>},   {"escaped", of_value<escaped>},
      {"lower", of_value<lower>},       {"upper", of_value<upper>},         {"filter", of_value<filter>},
      {"test", of_value<test>},         {"sameas", is_sameas},              {"odd", is_odd},
      {"even", is_even},                {"divisibleby", is_divisibleby},    {"in", is_in},
      {"==", compares<CompareOp::eq>},  {"eq", compares<CompareOp::eq>},    {"equalto", compares<CompareOp::eq>},
      {"!=", compares<CompareOp::ne>},  {"ne", compares<CompareOp::ne>},    {">", compares<CompareOp::gt>},
      {"gt", compares<CompareOp::gt>},  {"greaterthan", compares<CompareOp::gt>}, {">=", compares<CompareOp::ge>},
      {"ge", compares<CompareOp::ge>},  {"<", compares<CompareOp::lt>},     {"lt", compares<CompareOp::lt>},
      {"lessthan", compares<CompareOp::lt>}, {"<=", compares<CompareOp::le>}, {"le", compares<CompareOp::le>},
  };
  const auto it = tests.find(name);
  return it == tests.end() ? nullptr : it->second;
}

}  // namespace ferry::jinja
