// Jinja's filters, `value | name(args)`: jinja2's FILTERS table with transformers' tojson (see
// filters.cpp for each one's Python semantics). A few are registered but refuse to run (random,
// urlize, wordwrap, lipsum-like output): the error says so instead of "unknown filter".
#pragma once

#include <string_view>

#include "src/tokenizer/jinja/ast.h"

namespace ferry::jinja {

// The filter called `name`, or nullptr.
FilterFn find_filter(std::string_view name);

}  // namespace ferry::jinja
