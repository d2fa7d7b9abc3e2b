// Jinja's filters, `value | name(args)`: jinja2's FILTERS table with transformers' tojson (see
// filters.cpp for each one's Python semantics). A few are registered but refuse to run (random,
// urlize, wordwrap, lipsum-like output): the error says so instead of "unknown filter".
#pragma once

#include <string_view>

#include "src/tokenizer/jinja/ast.h"

namespace ferry::jinja {

// The filter called `name`, or nullptr.
FilterFn find_filter(std::string_view name);

// jinja2's filters that take the render context (map, select, reject, selectattr, rejectattr,
// random): its compiler never folds them into constants.
bool filter_needs_context(std::string_view name);

}  // namespace ferry::jinja
