// The names every template sees besides its variables: jinja2's globals (range, dict, namespace,
// cycler, joiner) as transformers sets them up (its dict() and namespace(), which refuse
// underscore names), and transformers' raise_exception() and strftime_now().
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

// namespace(): the one mutable value, for state that survives loop scopes
// ({% set ns.found = true %}).
class NamespaceObject : public Object {
 public:
  std::string_view type_name() const override { return "Namespace"; }
  Value attribute(std::string_view name) const override;
  std::string repr() const override;
  void clear() override { attrs_.clear(); }
  // Throws Failure (SecurityError) for an underscore name, as transformers' TemplateNamespace.
  void set(std::string_view name, Value value);

 private:
  std::vector<std::pair<std::string, Value>> attrs_;
};

// The global called `name`, or nullptr.
const Value* builtin_global(std::string_view name);

}  // namespace ferry::jinja
