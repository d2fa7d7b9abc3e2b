// Reading tokenizer_config.json's special tokens and chat template, and config.json's token ids.
#include "src/tokenizer/hf_tokenizer_config.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "src/core/error.h"
#include "src/core/file_util.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

nlohmann::json read_json_file(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_file(path.string()));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path.string() + " is not valid JSON (" + e.what() + ")");
  }
}

// A special token is written either as its text or as an AddedToken object {"content": ...}.
std::optional<std::string> token_text(const nlohmann::json& config, const char* key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  throw InputError(file + ": " + key + " must be a token's text or an object with a \"content\" string");
}

std::optional<std::string> chat_template_text(const nlohmann::json& config, const std::string& file) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    throw InputError(file + ": chat_template is a list without a template named \"default\"; name a template "
                     "with tokenizer.chat_template");
  }
  throw InputError(file + ": chat_template must be a string or a list of {name, template}");
}

std::optional<int64_t> token_id(const nlohmann::json& config, const char* key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  const nlohmann::json& value = it->is_array() && !it->empty() ? it->front() : *it;
  if (!value.is_number_integer()) throw InputError(file + ": " + key + " must be an integer or a list of integers");
  return value.get<int64_t>();
}

}  // namespace

HfTokenizerConfig read_hf_tokenizer_config(const std::string& folder) {
  HfTokenizerConfig out;
  std::error_code ec;
  const fs::path tokenizer_config = fs::path(folder) / "tokenizer_config.json";
  if (fs::exists(tokenizer_config, ec)) {
    out.source = tokenizer_config.string();
    const nlohmann::json config = read_json_file(tokenizer_config);
    if (!config.is_object()) throw InputError(out.source + " must hold a JSON object");
    out.bos_token = token_text(config, "bos_token", out.source);
    out.eos_token = token_text(config, "eos_token", out.source);
    out.pad_token = token_text(config, "pad_token", out.source);
    out.unk_token = token_text(config, "unk_token", out.source);
    out.chat_template = chat_template_text(config, out.source);
    if (out.chat_template) out.chat_template_source = out.source;
    if (const auto it = config.find("add_bos_token"); it != config.end() && !it->is_null()) {
      if (!it->is_boolean()) throw InputError(out.source + ": add_bos_token must be true or false");
      out.add_bos_token = it->get<bool>();
    }
  }
  // Newer transformers save the template beside the config as chat_template.jinja.
  const fs::path jinja = fs::path(folder) / "chat_template.jinja";
  if (!out.chat_template && fs::exists(jinja, ec)) {
    out.chat_template = read_file(jinja.string());
    out.chat_template_source = jinja.string();
  }
  const fs::path model_config = fs::path(folder) / "config.json";
  if (fs::exists(model_config, ec)) {
    const nlohmann::json config = read_json_file(model_config);
    if (config.is_object()) {
      out.bos_token_id = token_id(config, "bos_token_id", model_config.string());
      out.eos_token_id = token_id(config, "eos_token_id", model_config.string());
      out.pad_token_id = token_id(config, "pad_token_id", model_config.string());
    }
  }
  return out;
}

}  // namespace ferry
