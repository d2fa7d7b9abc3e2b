// The one place `tokenizer.chat_template` (and --chat-template) becomes a ChatTemplate:
//   auto          the model folder's own Jinja template(s) (chat_template.jinja, tokenizer_config.json's
//                 chat_template, ...; "tool_use" for conversations with tools when the folder names one);
//   jinja:NAME    the folder's template called NAME (of a list of named templates);
//   FILE.jinja    a Jinja template file;
//   a shipped name (demo, llama3, chatml, ...) or a .yaml/.yml/.json file: a YAML template.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/config/config.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {

class Tokenizer;

// `value` as described above. `kwargs` (a JSON object, or null) are extra variables for a Jinja
// template (tokenizer.chat_template_kwargs). ConfigError when the folder has no chat template for
// `auto`, no template of that name, or the file is missing; TemplateError (an InputError) naming
// file:line:column when a Jinja source does not parse. `setting` names the option in messages.
ChatTemplate resolve_chat_template(const std::string& value, const Tokenizer& tokenizer,
                                   const nlohmann::ordered_json& kwargs = nullptr,
                                   const std::string& setting = "tokenizer.chat_template");

// A stage's template: tokenizer.chat_template with tokenizer.chat_template_kwargs.
ChatTemplate resolve_chat_template(const TokenizerConfig& config, const Tokenizer& tokenizer);

// What the command-line tools (generate, eval, score) use when --chat-template is not given:
// "auto" when the tokenizer folder has a chat template of its own (a Hugging Face model), else
// "demo" (the template Ferry's demo models are trained with, which they carry no Jinja for).
std::string default_chat_template_name(const Tokenizer& tokenizer);

// The --chat-template help of generate, eval and score.
inline constexpr const char* kChatTemplateFlagHelp =
    "chat template: auto (the model folder's own Jinja template), jinja:NAME (one of its named templates), a "
    ".jinja file, a shipped name (demo, llama3, qwen2.5, ...: configs/templates) or a .yaml file; default: auto "
    "when the folder has a chat template, else demo";

// A command-line tool's --chat-template: resolve_chat_template of its value, or of
// default_chat_template_name when it was not given (empty).
ChatTemplate resolve_command_line_chat_template(const std::string& flag_value, const Tokenizer& tokenizer);

}  // namespace ferry
