// Which shipped chat template a model folder's Hugging Face (Jinja) chat template is, and the one
// place `tokenizer.chat_template` is turned into a ChatTemplate (a name, a file, or `auto`).
//
// A shipped template that reproduces a Hugging Face one keeps the Jinja sources it reproduces as
// configs/templates/jinja/<template>/<model>.jinja (copied from that model's tokenizer_config.json).
// `auto` picks <template> when the folder's chat template equals one of them after
// normalise_jinja, which removes only what cannot change the rendered text. Anything else is a
// ConfigError: a near miss (an edited system prompt, another revision) may render other text, so
// it never maps to a family silently.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/tokenizer/chat_template.h"

namespace ferry {

class Tokenizer;

// A Jinja source Ferry knows: configs/templates/jinja/<template>/<file>.
struct KnownJinjaTemplate {
  std::string template_name;  // the shipped .yaml that renders the same text ("qwen2.5")
  std::string path;           // the .jinja file
  std::string normalised;     // normalise_jinja of its text
};

// The Jinja source without what Jinja (as transformers configures it: trim_blocks, lstrip_blocks)
// never outputs: comments; whitespace inside {{ }} and {% %} outside string literals (one space
// kept between two name characters); whitespace that `-` markers, trim_blocks and lstrip_blocks
// strip; the final newline; and "\r\n" line ends written as "\n". Two sources with the same
// normal form render the same text.
std::string normalise_jinja(std::string_view source);

// Every .jinja under the `jinja` folder of each chat template search folder (chat_template_path.h),
// sorted by template name and file.
std::vector<KnownJinjaTemplate> known_jinja_templates();

// The known template `jinja` is (after normalise_jinja), or nullopt.
std::optional<KnownJinjaTemplate> recognise_chat_template(std::string_view jinja);

// `name_or_path` as load_chat_template reads it, except "auto": the template recognised from the
// tokenizer folder's chat template (tokenizer.hf_config()). ConfigError when the folder has none
// or one Ferry does not know, saying how to name a template. `setting` names the option in
// messages ("tokenizer.chat_template", "--chat-template").
ChatTemplate resolve_chat_template(const std::string& name_or_path, const Tokenizer& tokenizer,
                                   const std::string& setting = "tokenizer.chat_template");

// What the command-line tools (generate, eval, score) use when --chat-template is not given:
// "auto" when the tokenizer folder has a chat template of its own (a Hugging Face model), else
// "demo" (the template Ferry's demo models are trained with, which they carry no Jinja for).
std::string default_chat_template_name(const Tokenizer& tokenizer);

// A command-line tool's --chat-template: resolve_chat_template of its value, or of
// default_chat_template_name when it was not given (empty).
ChatTemplate resolve_command_line_chat_template(const std::string& flag_value, const Tokenizer& tokenizer);

}  // namespace ferry
