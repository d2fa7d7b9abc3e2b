// Python's operators on template values, as jinja2's sandbox applies them: arithmetic (+ on
// strings and lists, % formatting, the Markup escaping rules), comparisons, `in`, len(),
// iteration, and the sandboxed attribute and item lookups (jinja2's SandboxedEnvironment.getattr
// and getitem: `x.name` prefers a Python attribute such as dict.items, then the key; `x['name']`
// the other way round; `_private` and mutating methods are refused).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

class Evaluator;

enum class BinaryOp : uint8_t { add, sub, mul, div, floordiv, mod, pow };
enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge, in, not_in };

Value arithmetic(Evaluator& ev, BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
bool compare(Evaluator& ev, CompareOp op, const Value& a, const Value& b);
// Python's a < b; throws TypeError for values that do not order (None, dicts, mixed types).
bool less_than(const Value& a, const Value& b);
bool contains(Evaluator& ev, const Value& container, const Value& item);

Value get_attr(const Value& obj, std::string_view name);
// The attribute only, never the item (jinja2's attr filter); undefined when there is none.
Value get_attr_only(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// list(v): the items iterating v gives (a dict's keys, a string's characters; nothing for
// Undefined). Charges one step per item. Throws TypeError for what does not iterate.
std::vector<Value> iterate(Evaluator& ev, const Value& v);
// len(v), or nullopt where Python has no len() (generators, numbers, None).
std::optional<int64_t> length_of(const Value& v);
int64_t length(const Value& v);  // throws TypeError where length_of is nullopt

// markupsafe.escape of a string: & < > ' " as HTML entities.
std::string escape_html(std::string_view s);
// Markup + str escapes the plain side: the text `v` contributes when joined to Markup.
std::string markup_text(const Value& v);

// Checked 64-bit integer arithmetic: Python's ints do not overflow, Ferry's throw.
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);
// An int argument (bool counts): throws TypeError naming `what` otherwise.
int64_t to_index(const Value& v, std::string_view what);

}  // namespace ferry::jinja
