// Python's str() and repr() of template values: what `{{ value }}` prints ('None', 'True',
// "['a', 1]", "{'k': 'v'}", '1e-05'), and the quoting repr gives strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

// repr(str): single quotes unless the text holds ' and no ", non-printable characters escaped.
std::string repr_string(std::string_view s);
// repr(float) / str(float): the shortest text that reads back as the same double, laid out as
// Python does ('1.0', '0.0001', '1e-05', '1e+16', 'inf', 'nan').
std::string float_repr(double d);
std::string int_str(int64_t i);
// "0x7f..." as Python prints object addresses in reprs ("<built-in method items of dict object at
// 0x...>"); the text never matches Python's, its shape does.
std::string address_text(const void* p);

std::string repr(const Value& v);
// str(v): a string's own text, '' for Undefined, repr() for the rest.
std::string to_str(const Value& v);
void append_str(std::string& out, const Value& v);

}  // namespace ferry::jinja
