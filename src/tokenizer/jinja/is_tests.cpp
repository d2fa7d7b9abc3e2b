// Jinja's tests (jinja2/tests.py), as Python evaluates them on template values.
#include "src/tokenizer/jinja/is_tests.h"

#include <unordered_map>

#include "src/tokenizer/jinja/call_args.h"
#include "src/tokenizer/jinja/error.h"
#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/filters.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {
namespace {

// The single argument of a two-operand test (`x is eq 3`, `x is divisibleby(3)`).
const Value& other(const CallArgs& args, std::string_view test) {
  return ArgReader(args, test, {"other"}).get(0);
}

bool is_defined(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "defined");
  return !v.is_undefined();
}

bool is_undefined(Evaluator& ev, const Value& v, const CallArgs& args) { return !is_defined(ev, v, args); }

bool is_none(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "none");
  return v.is_none();
}

bool is_boolean(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "boolean");
  return v.is_bool();
}

bool is_true(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "true");
  return v.is_bool() && v.as_bool();
}

bool is_false(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "false");
  return v.is_bool() && !v.as_bool();
}

bool is_integer(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "integer");
  return v.is_int();
}

bool is_float(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "float");
  return v.is_float();
}

bool is_number(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "number");
  return v.is_number();
}

bool is_string(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "string");
  return v.is_string();
}

bool is_mapping(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "mapping");
  return v.is_dict();
}

// len() works and __getitem__ exists: str, list, tuple, dict (not dict views or generators).
bool is_sequence(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "sequence");
  return indexable(v) || v.is_dict();
}

bool is_iterable(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "iterable");
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
         (v.is_object() && v.object().is_iterator());
}

bool is_callable(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "callable");
  return v.is_undefined() || (v.is_object() && v.object().callable());  // Undefined has __call__
}

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

bool is_escaped(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "escaped");
  return v.is_markup();
}

bool is_lower(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "lower");
  return pystr::is_lower(to_str(v));
}

bool is_upper(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "upper");
  return pystr::is_upper(to_str(v));
}

Value modulo(Evaluator& ev, const Value& v, const Value& by) { return arithmetic(ev, BinaryOp::mod, v, by); }

bool is_odd(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "odd");
  return equals(modulo(ev, v, Value::integer(2)), Value::integer(1));
}

bool is_even(Evaluator& ev, const Value& v, const CallArgs& args) {
  expect_no_args(args, "even");
  return equals(modulo(ev, v, Value::integer(2)), Value::integer(0));
}

bool is_divisibleby(Evaluator& ev, const Value& v, const CallArgs& args) {
  return equals(modulo(ev, v, ArgReader(args, "divisibleby", {"num"}).get(0)), Value::integer(0));
}

bool is_in(Evaluator& ev, const Value& v, const CallArgs& args) {
  return contains(ev, ArgReader(args, "in", {"seq"}).get(0), v);
}

bool is_filter(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool is_test(Evaluator&, const Value& v, const CallArgs& args) {
  expect_no_args(args, "test");
  return v.is_string() && find_test(v.str()) != nullptr;
}

template <CompareOp op>
bool compares(Evaluator& ev, const Value& v, const CallArgs& args) {
  return compare(ev, op, v, other(args, "compare"));
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> tests = {
      {"defined", is_defined},     {"undefined", is_undefined},
      {"none", is_none},           {"boolean", is_boolean},
      {"true", is_true},           {"false", is_false},
      {"integer", is_integer},     {"float", is_float},
      {"number", is_number},       {"string", is_string},
      {"mapping", is_mapping},     {"sequence", is_sequence},
      {"iterable", is_iterable},   {"callable", is_callable},
      {"sameas", is_sameas},       {"escaped", is_escaped},
      {"lower", is_lower},         {"upper", is_upper},
      {"odd", is_odd},             {"even", is_even},
      {"divisibleby", is_divisibleby}, {"in", is_in},
      {"filter", is_filter},       {"test", is_test},
      {"==", compares<CompareOp::eq>}, {"eq", compares<CompareOp::eq>},
      {"equalto", compares<CompareOp::eq>}, {"!=", compares<CompareOp::ne>},
      {"ne", compares<CompareOp::ne>}, {">", compares<CompareOp::gt>},
      {"gt", compares<CompareOp::gt>}, {"greaterthan", compares<CompareOp::gt>},
      {">=", compares<CompareOp::ge>}, {"ge", compares<CompareOp::ge>},
      {"<", compares<CompareOp::lt>}, {"lt", compares<CompareOp::lt>},
      {"lessthan", compares<CompareOp::lt>}, {"<=", compares<CompareOp::le>},
      {"le", compares<CompareOp::le>},
  };
  const auto it = tests.find(name);
  return it == tests.end() ? nullptr : it->second;
}

}  // namespace ferry::jinja
