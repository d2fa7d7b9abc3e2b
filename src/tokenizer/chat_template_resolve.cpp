// Turning `tokenizer.chat_template` into a ChatTemplate (see chat_template_resolve.h).
#include "src/tokenizer/chat_template_resolve.h"

#include <filesystem>

#include "core/error.h"
#include "core/file_util.h"
#include "core/text.h"
#include "src/tokenizer/chat_template_path.h"
#include "src/tokenizer/jinja_chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string tokenizer_folder(const Tokenizer& tokenizer) {
  const std::string folder = fs::path(tokenizer.path()).parent_path().string();
  return folder.empty() ? "." : folder;
}

ChatTemplate jinja_chat_template(const std::vector<HfChatTemplate>& sources, const Tokenizer& tokenizer,
                                 const nlohmann::ordered_json& kwargs, const std::string& name) {
  auto jinja = std::make_shared<const JinjaChatTemplate>(sources, tokenizer.hf_config(), kwargs);
  ChatTemplate t;
  t.name = name;
  t.source = jinja->file();
  t.assistant_suffix = jinja->end_of_turn();
  t.bos = false;
  t.tokenization = TemplateTokenization::whole;
  t.jinja = std::move(jinja);
  return t;
}

}  // namespace

ChatTemplate resolve_chat_template(const std::string& value, const Tokenizer& tokenizer,
                                   const nlohmann::ordered_json& kwargs, const std::string& setting) {
  const HfTokenizerConfig& hf = tokenizer.hf_config();
  if (ends_with(value, ".jinja")) {
    std::error_code ec;
    if (!fs::is_regular_file(value, ec)) {
      throw ConfigError(setting + ": Jinja chat template file '" + value + "' does not exist (relative paths are "
                        "relative to " + fs::current_path(ec).string() + ")");
    }
    return jinja_chat_template({{"default", read_file(value), value}}, tokenizer, kwargs, value);
  }
  const std::string how = "set " + setting + " to a shipped template (" + join(shipped_chat_template_names(), ", ") +
                          "), a .jinja file or a .yaml/.json template file (configs/templates/README.md)";
  if (value == "auto") {
    const HfChatTemplate* main = hf.chat_template("default");
    if (main == nullptr) {
      throw ConfigError(setting + " is auto, but the tokenizer folder '" + tokenizer_folder(tokenizer) + "' has " +
                        (hf.chat_templates.empty()
                             ? std::string("no chat template (no chat_template in tokenizer_config.json, no "
                                           "chat_template.jinja)")
                             : "no chat template named \"default\" (it has " + join(hf.chat_template_names(), ", ") +
                                   "; pick one with jinja:NAME)") +
                        "; " + how);
    }
    std::vector<HfChatTemplate> sources{*main};
    if (const HfChatTemplate* tool_use = hf.chat_template("tool_use")) sources.push_back(*tool_use);
    return jinja_chat_template(sources, tokenizer, kwargs, "auto");
  }
  if (value.rfind("jinja:", 0) == 0) {
    const std::string name = value.substr(6);
    const HfChatTemplate* chosen = hf.chat_template(name);
    if (chosen == nullptr) {
      const std::vector<std::string> names = hf.chat_template_names();
      throw ConfigError(setting + " is " + value + ", but the tokenizer folder '" + tokenizer_folder(tokenizer) +
                        "' has no chat template named \"" + name + "\"" + did_you_mean(name, names) +
                        " (it has: " + (names.empty() ? std::string("none") : join(names, ", ")) + ")");
    }
    return jinja_chat_template({*chosen}, tokenizer, kwargs, value);
  }
  if (!kwargs.is_null() && !kwargs.empty()) {
    throw ConfigError("tokenizer.chat_template_kwargs are variables for a Jinja chat template, but " + setting +
                      " is the shipped/YAML template '" + value + "', which takes none; remove them or use auto");
  }
  return load_chat_template(value);
}

ChatTemplate resolve_chat_template(const TokenizerConfig& config, const Tokenizer& tokenizer) {
  return resolve_chat_template(config.chat_template, tokenizer, nlohmann::ordered_json::parse(config.chat_template_kwargs.json));
}

std::string default_chat_template_name(const Tokenizer& tokenizer) {
  return tokenizer.hf_config().chat_template("default") ? "auto" : "demo";
}

ChatTemplate resolve_command_line_chat_template(const std::string& flag_value, const Tokenizer& tokenizer) {
  return resolve_chat_template(flag_value.empty() ? default_chat_template_name(tokenizer) : flag_value, tokenizer,
                               nullptr, "--chat-template");
}

}  // namespace ferry
