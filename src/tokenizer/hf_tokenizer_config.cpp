// Reading tokenizer_config.json's special tokens, the folder's chat templates, and config.json's token ids.
#include "src/tokenizer/hf_tokenizer_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/file_util.h"

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

// tokenizer_config.json's chat_template: a string ("default") or a list of {name, template}.
std::vector<HfChatTemplate> config_chat_templates(const nlohmann::json& config, const std::string& file) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return {};
  if (it->is_string()) return {{"default", it->get<std::string>(), file}};
  if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    std::vector<HfChatTemplate> out;
    for (const auto& entry : *it) {
      const auto name = entry.is_object() ? entry.find("name") : entry.end();
      const auto text = entry.is_object() ? entry.find("template") : entry.end();
      if (!entry.is_object() || name == entry.end() || !name->is_string() || text == entry.end() ||
          !text->is_string()) {
        throw InputError(file + ": chat_template: each entry of the list must be {\"name\": ..., \"template\": ...}");
      }
      out.push_back({name->get<std::string>(), text->get<std::string>(), file + " (chat_template " +
                                                                             name->get<std::string>() + ")"});
    }
    return out;
  }
  throw InputError(file + ": chat_template must be a string or a list of {name, template}");
}

// The template files beside the config (transformers prefers them to tokenizer_config.json's).
std::vector<HfChatTemplate> file_chat_templates(const fs::path& folder) {
  std::vector<HfChatTemplate> out;
  std::error_code ec;
  if (const fs::path jinja = folder / "chat_template.jinja"; fs::exists(jinja, ec)) {
    out.push_back({"default", read_file(jinja.string()), jinja.string()});
  }
  std::vector<fs::path> named;
  for (const auto& entry : fs::directory_iterator(folder / "additional_chat_templates", ec)) {
    if (entry.path().extension() == ".jinja") named.push_back(entry.path());
  }
  std::sort(named.begin(), named.end());
  for (const auto& path : named) out.push_back({path.stem().string(), read_file(path.string()), path.string()});
  if (!out.empty()) return out;
  if (const fs::path json = folder / "chat_template.json"; fs::exists(json, ec)) {
    const nlohmann::json config = read_json_file(json);
    if (!config.is_object()) throw InputError(json.string() + " must hold a JSON object");
    return config_chat_templates(config, json.string());
  }
  return out;
}

std::optional<int64_t> token_id(const nlohmann::json& config, const char* key, const std::string& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  const nlohmann::json& value = it->is_array() && !it->empty() ? it->front() : *it;
  if (!value.is_number_integer()) throw InputError(file + ": " + key + " must be an integer or a list of integers");
  return value.get<int64_t>();
}

}  // namespace

const HfChatTemplate* HfTokenizerConfig::chat_template(const std::string& name) const {
  for (const HfChatTemplate& t : chat_templates) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> HfTokenizerConfig::chat_template_names() const {
  std::vector<std::string> names;
  for (const HfChatTemplate& t : chat_templates) names.push_back(t.name);
  return names;
}

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
    out.sep_token = token_text(config, "sep_token", out.source);
    out.cls_token = token_text(config, "cls_token", out.source);
    out.mask_token = token_text(config, "mask_token", out.source);
    out.chat_templates = config_chat_templates(config, out.source);
    for (const auto& [key, field] : {std::pair{"add_bos_token", &out.add_bos_token}, std::pair{"legacy", &out.legacy},
                                     std::pair{"add_prefix_space", &out.add_prefix_space}}) {
      if (const auto it = config.find(key); it != config.end() && !it->is_null()) {
        if (!it->is_boolean()) throw InputError(out.source + ": " + key + " must be true or false");
        *field = it->get<bool>();
      }
    }
  }
  // Newer transformers save the templates beside the config (chat_template.jinja), and prefer them.
  if (auto files = file_chat_templates(fs::path(folder)); !files.empty()) out.chat_templates = std::move(files);
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
