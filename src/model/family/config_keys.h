// Typed access to one config.json object, with errors that name the file and the key path: what
// every family's config reader (model_family.h) reads its keys with.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ferry {

class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  // Present, null or not.
  bool contains(const std::string& key) const { return object_.contains(key); }

  // Throws ConfigError "<source>: '<prefix><key>' <problem>".
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

  int64_t positive_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  double positive_number(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  // A number > 0, or null / absent -> 0 (off): soft-capping values.
  double optional_positive_number(const std::string& key) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::optional<std::string> string(const std::string& key) const;
  // A token id: an integer, or null / absent -> -1 (none).
  int64_t token_id(const std::string& key, int64_t fallback) const;

  const nlohmann::json& object() const { return object_; }
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace ferry
