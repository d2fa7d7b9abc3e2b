// The parts of a Hugging Face model folder's tokenizer_config.json (and config.json's token ids)
// that Ferry uses beside tokenizer.json: which added tokens are BOS, EOS and pad, and the Jinja
// chat template string (recognised by family in chat_template_family.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ferry {

struct HfTokenizerConfig {
  // Token texts ("<|im_end|>"); nullopt when the file leaves them out or sets them to null.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  // The Jinja template; of a list of named templates, the one named "default"; else the
  // folder's chat_template.jinja.
  std::optional<std::string> chat_template;
  // The file chat_template was read from (tokenizer_config.json or chat_template.jinja), for
  // messages.
  std::string chat_template_source;
  std::optional<bool> add_bos_token;
  // config.json's bos/eos/pad_token_id (the first of a list), used when the texts are absent.
  std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;
  // The tokenizer_config.json path, for messages (empty when the folder has none).
  std::string source;
};

// Reads `<folder>/tokenizer_config.json` and `<folder>/config.json` when present (either may be
// missing: the result then has fewer fields). InputError naming the file and key for malformed
// JSON or a field of the wrong type.
HfTokenizerConfig read_hf_tokenizer_config(const std::string& folder);

}  // namespace ferry
