// ConfigKeys: typed config.json access with errors that name the key.
#include "src/model/family/config_keys.h"

#include <cmath>

#include "core/error.h"

namespace ferry {

using nlohmann::json;

void ConfigKeys::fail(const std::string& key, const std::string& problem) const {
  throw ConfigError(source_ + ": '" + prefix_ + key + "' " + problem);
}

int64_t ConfigKeys::positive_int(const std::string& key, std::optional<int64_t> fallback) const {
  const int64_t value = integer(key, fallback);
  if (value <= 0) fail(key, "must be a positive integer, got " + std::to_string(value));
  return value;
}

int64_t ConfigKeys::integer(const std::string& key, std::optional<int64_t> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    fail(key, "is missing; a decoder model's config.json needs it");
  }
  const json& value = object_.at(key);
  if (!value.is_number_integer()) fail(key, "must be an integer, got " + value.dump());
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    fail(key, "is too large: " + value.dump());
  }
  return value.get<int64_t>();
}

double ConfigKeys::positive_number(const std::string& key, std::optional<double> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    fail(key, "is missing");
  }
  const json& value = object_.at(key);
  if (!value.is_number()) fail(key, "must be a number, got " + value.dump());
  const double number = value.get<double>();
  if (!(number > 0) || !std::isfinite(number)) fail(key, "must be a positive number, got " + value.dump());
  return number;
}

double ConfigKeys::optional_positive_number(const std::string& key) const {
  return has(key) ? positive_number(key) : 0.0;
}

bool ConfigKeys::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& value = object_.at(key);
  if (!value.is_boolean()) fail(key, "must be true or false, got " + value.dump());
  return value.get<bool>();
}

std::optional<std::string> ConfigKeys::string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const json& value = object_.at(key);
  if (!value.is_string()) fail(key, "must be a string, got " + value.dump());
  return value.get<std::string>();
}

int64_t ConfigKeys::token_id(const std::string& key, int64_t fallback) const {
  if (!object_.contains(key)) return fallback;
  if (object_.at(key).is_null()) return -1;
  const int64_t value = integer(key);
  if (value < 0) fail(key, "must be a non-negative token id or null, got " + std::to_string(value));
  return value;
}

}  // namespace ferry
