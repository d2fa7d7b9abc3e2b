// Binding a call's arguments to a Python signature, for filters, tests, methods and globals:
// `join(d='', attribute=None)` takes `join(', ')` or `join(attribute='name')`, and a wrong call is
// the TypeError Python gives ("split() got an unexpected keyword argument 'x'").
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "src/tokenizer/jinja/value.h"

namespace ferry::jinja {

class ArgReader {
 public:
  static constexpr size_t kMaxParams = 8;

  // `params` are the parameter names in order. With positional_only, keywords are refused (most
  // of Python's str methods). Throws Failure for extra, unknown or repeated arguments.
  ArgReader(const CallArgs& args, std::string_view function, std::initializer_list<std::string_view> params,
            bool positional_only = false);

  bool has(size_t i) const { return values_[i] != nullptr; }
  const Value& get(size_t i) const;  // throws "missing required argument" when not given
  Value get_or(size_t i, Value fallback) const { return has(i) ? *values_[i] : std::move(fallback); }
  // Typed reads; `fallback` where the argument was not given.
  int64_t int_or(size_t i, int64_t fallback) const;
  bool bool_or(size_t i, bool fallback) const;
  // A str argument (None counts as not given when none_is_default).
  const std::string* string_or_null(size_t i, bool none_is_default = true) const;

 private:
  [[noreturn]] void fail(const std::string& message) const;

  std::string_view function_;
  std::array<std::string_view, kMaxParams> names_{};
  std::array<const Value*, kMaxParams> values_{};
};

// Fails unless the call passed no arguments.
void expect_no_args(const CallArgs& args, std::string_view function);

}  // namespace ferry::jinja
