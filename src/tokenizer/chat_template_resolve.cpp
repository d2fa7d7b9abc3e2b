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

// Marker pieces a template writes: "<|user|>", "<start_of_turn>", "</s>" (angle-bracketed, no space).
std::vector<std::string> template_markers(const ChatTemplate& t) {
  std::vector<std::string> out;
  for (const std::string* text : {&t.system_prefix, &t.system_suffix, &t.user_prefix, &t.user_suffix,
                                  &t.assistant_prefix, &t.assistant_suffix}) {
    for (size_t open = text->find('<'); open != std::string::npos; open = text->find('<', open + 1)) {
      const size_t close = text->find('>', open);
      if (close == std::string::npos) break;
      const std::string marker = text->substr(open, close - open + 1);
      if (marker.size() > 2 && marker.find_first_of(" \n\t<", 1) == std::string::npos) out.push_back(marker);
    }
  }
  return out;
}

// A shipped template copied from a demo config onto a real model is a silent trap: its markers are
// plain text to the model's tokenizer. When the tokenizer folder has its own chat template, every
// marker the shipped one writes must be one token of that tokenizer.
void check_template_belongs(const ChatTemplate& t, const Tokenizer& tokenizer, const std::string& setting) {
  if (tokenizer.hf_config().chat_template("default") == nullptr) return;
  for (const std::string& marker : template_markers(t)) {
    bool one_token = tokenizer.find_piece(marker).has_value();
    for (const auto& [text, id] : tokenizer.control_pieces()) one_token = one_token || text == marker;
    if (!one_token) {
      throw ConfigError(setting + ": the shipped template '" + t.name + "' (" + t.source + ") writes \"" + marker +
                        "\", which is not a token of the model's tokenizer '" + tokenizer.path() +
                        "': the template belongs to another model. That folder has its own chat template: drop " +
                        setting + " (its default, auto, uses the folder's), or name a template written for it");
    }
  }
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
  ChatTemplate shipped = load_chat_template(value);
  check_template_belongs(shipped, tokenizer, setting);
  return shipped;
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
