// Python's string formatting as templates reach it: `'%s: %d' % (a, b)` and the `format` filter
// (printf-style), `'{}: {:>8}'.format(a, b)` (str.format, as jinja2's SandboxedFormatter runs it:
// attribute and item lookups in fields go through the sandbox).
#pragma once

#include <string>
#include <string_view>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

// fmt % args: a tuple gives the positional values, a dict the %(name)s ones, anything else is
// the one value. Args that are Markup-escaped when fmt is Markup.
std::string percent_format(Evaluator& ev, const Value& fmt, const Value& args);

// fmt.format(*args, **kwargs).
std::string format_method(Evaluator& ev, std::string_view fmt, const CallArgs& args);

// format(value, spec): Python's format specification mini-language for str, int and float.
std::string format_spec(Evaluator& ev, const Value& value, std::string_view spec);

}  // namespace ferry::jinja
