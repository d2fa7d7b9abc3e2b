// Reading Hugging Face tokenizer.json fields with errors that name the file and the field
// ("tokenizer.json: normalizer.type 'NFKD' is not supported (supported: NFC, Sequence)").
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ferry {

struct JsonField {
  const std::string& file;  // the tokenizer.json path, first in every message
  std::string path;         // "pre_tokenizer.pretokenizers[1]"

  JsonField at(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  JsonField at(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }

  // Throws InputError "<file>: <path> <what>".
  [[noreturn]] void fail(const std::string& what) const;
  // Throws InputError "<file>: <path> '<value>' is not supported (supported: a, b)".
  [[noreturn]] void unsupported(const std::string& value, const std::vector<std::string>& supported) const;
};

// The `type` string of a component object (`field` is where it sits, for messages).
std::string json_type(const nlohmann::json& object, const JsonField& field);

// Optional members: `fallback` when absent or null; InputError when of the wrong type.
bool json_bool(const nlohmann::json& object, const char* key, bool fallback, const JsonField& field);
std::string json_string(const nlohmann::json& object, const char* key, const std::string& fallback,
                        const JsonField& field);

}  // namespace ferry
