// Python's methods on template values: `content.strip()`, `text.split('\n', 1)`,
// `message.get('tool_calls')`, `d.items()`, `xs.index(x)`, ... A method is found as Python's
// getattr would find it and comes back bound to its value; calling it runs Python's semantics.
// Methods that would change a list or dict (append, pop, update, ...) come back as the sandbox's
// "unsafe" Undefined: calling one is jinja2's SecurityError, as in transformers.
#pragma once

#include <optional>
#include <string_view>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

// The method `name` of a str, list, tuple or dict bound to `self`; nullopt where Python has no
// such attribute.
std::optional<Value> find_method(const Value& self, std::string_view name);

// A built-in function value (range, dict, the bound methods above): calls fn.
class BuiltinFunction : public Object {
 public:
  using Fn = Value (*)(Evaluator& ev, const Value& self, const CallArgs& args);
  BuiltinFunction(std::string_view name, Fn fn, Value self = Value()) : name_(name), fn_(fn), self_(std::move(self)) {}
  std::string_view type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value call(Evaluator& ev, CallArgs& args) override;
  std::string repr() const override;
  void clear() override { self_ = Value(); }

 private:
  std::string_view name_;
  Fn fn_;  // null: a Python method the renderer does not implement
  Value self_;
};

}  // namespace ferry::jinja
