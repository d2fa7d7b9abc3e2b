// Jinja's tests, `value is name(args)`: jinja2's TESTS table (defined, none, string, mapping,
// iterable, sequence, number, integer, float, boolean, true, false, callable, sameas, eq, ne,
// lt, gt, ..., odd, even, divisibleby, lower, upper, in, escaped, filter, test).
#pragma once

#include <string_view>

#include "src/tokenizer/jinja/ast.h"

namespace ferry::jinja {

// The test called `name`, or nullptr.
TestFn find_test(std::string_view name);

}  // namespace ferry::jinja
