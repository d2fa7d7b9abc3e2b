// Reading tokenizer.json fields with errors that name the file and the field.
#include "src/tokenizer/tokenizer_json.h"

#include "core/error.h"
#include "core/text.h"

namespace ferry {

void JsonField::fail(const std::string& what) const { throw InputError(file + ": " + path + " " + what); }

void JsonField::unsupported(const std::string& value, const std::vector<std::string>& supported) const {
  fail("'" + value + "' is not supported (supported: " + join(supported, ", ") + ")");
}

std::string json_type(const nlohmann::json& object, const JsonField& field) {
  if (!object.is_object()) field.fail("must be an object, not " + object.dump().substr(0, 60));
  const auto it = object.find("type");
  if (it == object.end() || !it->is_string()) field.at("type").fail("is missing (each component names its type)");
  return it->get<std::string>();
}

bool json_bool(const nlohmann::json& object, const char* key, bool fallback, const JsonField& field) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) field.at(key).fail("must be true or false, not " + it->dump());
  return it->get<bool>();
}

std::string json_string(const nlohmann::json& object, const char* key, const std::string& fallback,
                        const JsonField& field) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_string()) field.at(key).fail("must be a string, not " + it->dump());
  return it->get<std::string>();
}

}  // namespace ferry
