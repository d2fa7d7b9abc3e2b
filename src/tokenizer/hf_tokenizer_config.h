// The parts of a Hugging Face model folder's tokenizer_config.json (and config.json's token ids)
// that Ferry uses beside the tokenizer: which added tokens are BOS, EOS and pad, the special
// tokens a chat template sees (bos_token, eos_token, ...), and the folder's Jinja chat templates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry {

// One of a folder's Jinja chat templates.
struct HfChatTemplate {
  std::string name;    // "default", or a named one ("tool_use", "rag", ...)
  std::string source;  // the Jinja text
  std::string file;    // where it was read from, for messages ("<folder>/chat_template.jinja")
};

struct HfTokenizerConfig {
  // Token texts ("<|im_end|>"); nullopt when the file leaves them out or sets them to null.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  // The other special tokens transformers passes to a chat template (special_tokens_map).
  std::optional<std::string> sep_token, cls_token, mask_token;
  // The folder's chat templates, found as transformers finds them: chat_template.jinja ("default")
  // and additional_chat_templates/<name>.jinja; else chat_template.json's chat_template; else
  // tokenizer_config.json's chat_template (a string: "default"; or a list of {name, template}).
  std::vector<HfChatTemplate> chat_templates;
  std::optional<bool> add_bos_token;
  // How a SentencePiece (Llama-style) tokenizer puts "▁" in front of text, as transformers 5's
  // LlamaTokenizer reads them: `legacy` (default false) true prepends it to every stretch of text
  // between special tokens, false only to the text's start; add_prefix_space false never does.
  std::optional<bool> legacy, add_prefix_space;
  // config.json's bos/eos/pad_token_id (the first of a list), used when the texts are absent.
  std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;
  // The tokenizer_config.json path, for messages (empty when the folder has none).
  std::string source;

  // The template called `name`, or null.
  const HfChatTemplate* chat_template(const std::string& name) const;
  // Their names, for messages.
  std::vector<std::string> chat_template_names() const;
};

// Reads `<folder>/tokenizer_config.json`, the chat template files and `<folder>/config.json` when
// present (any may be missing: the result then has fewer fields). InputError naming the file and
// key for malformed JSON or a field of the wrong type.
HfTokenizerConfig read_hf_tokenizer_config(const std::string& folder);

}  // namespace ferry
