// Binding call arguments to Python signatures (see call_args.h).
#include "src/tokenizer/jinja/call_args.h"

#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja/repr.h"

namespace ferry::jinja {

ArgReader::ArgReader(const CallArgs& args, std::string_view function, std::initializer_list<std::string_view> params,
                     bool positional_only)
    : function_(function) {
  FERRY_CHECK(params.size() <= kMaxParams, "ArgReader for ", function, " has too many parameters");
  size_t n = 0;
  for (std::string_view name : params) names_[n++] = name;
  if (args.positional.size() > n) {
    fail("takes at most " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + " (" +
         std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    if (positional_only) fail("takes no keyword arguments");
    size_t i = 0;
    while (i < n && names_[i] != key) ++i;
    if (i == n) fail("got an unexpected keyword argument " + repr_string(key));
    if (values_[i]) fail("got multiple values for argument " + repr_string(key));
    values_[i] = &value;
  }
}

const Value& ArgReader::get(size_t i) const {
  if (!values_[i]) fail("missing required argument " + repr_string(names_[i]));
  return *values_[i];
}

int64_t ArgReader::int_or(size_t i, int64_t fallback) const {
  if (!has(i) || values_[i]->is_none()) return fallback;
  if (!values_[i]->is_integral()) {
    fail("argument " + repr_string(names_[i]) + " must be an integer, not '" + type_name(*values_[i]) + "'");
  }
  return values_[i]->as_int();
}

bool ArgReader::bool_or(size_t i, bool fallback) const { return has(i) ? truthy(*values_[i]) : fallback; }

const std::string* ArgReader::string_or_null(size_t i, bool none_is_default) const {
  if (!has(i) || (none_is_default && values_[i]->is_none())) return nullptr;
  if (!values_[i]->is_string()) {
    fail("argument " + repr_string(names_[i]) + " must be str, not '" + type_name(*values_[i]) + "'");
  }
  return &values_[i]->str();
}

void ArgReader::fail(const std::string& message) const {
  throw Failure("TypeError: " + std::string(function_) + "() " + message);
}

void expect_no_args(const CallArgs& args, std::string_view function) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    throw Failure("TypeError: " + std::string(function) + "() takes no arguments");
  }
}

}  // namespace ferry::jinja
