// Hugging Face config.json <-> ModelShape. model_type picks the family (src/model/family/: llama,
// mistral, qwen2, qwen3, gemma2, gemma3_text, smollm3, olmo2, olmo3); the keys every family shares
// are read here with that family's defaults (both the older `rope_theta` + `rope_scaling` keys and
// the newer `rope_parameters` object), the family's own keys by its description. Writes what
// transformers 5 saves itself (plus the older rope keys, for older tools).
//
// `architectures` names the class transformers' Auto* loaders build: a causal LM is written as the
// family's causal-LM class (CausalLM, Gemma3ForCausalLM, ...); a score model (reward model,
// critic: `score.weight`, one output) as the family's sequence-classification class with
// num_labels 1 (id2label {"0": "LABEL_0"}, label2id
// {"LABEL_0": 0}, as transformers writes them), so AutoModelForSequenceClassification loads it.
// transformers scores each row at its last token that is not pad_token_id, so a score config
// always carries one: the model's pad id, else its first EOS id (then a row that ends with EOS is
// scored one token early by transformers: right-pad with a real pad id, or left-pad).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/config/model_shape.h"

namespace ferry::io {

// Throws InputError if the file cannot be read, ConfigError naming the file and key for a bad or
// unsupported value (an unknown model_type, architectures class or rope type, a non-integer size,
// Qwen sliding-window layers, ...), listing what is supported, and InputError for a
// `quantization_config` Ferry cannot read (anything but bitsandbytes 4-bit nf4: hf_quantization.h).
ModelShape read_hf_config(const std::filesystem::path& config_json);
// The same from text; `source` names it in error messages.
ModelShape parse_hf_config(std::string_view json_text, const std::string& source);

// The head a config.json is for: causal_lm (logits, `lm_head.weight`) or score (one value per
// token, `score.weight`: HF *ForSequenceClassification with num_labels 1).
enum class HfHead { causal_lm, score };

// score when `architectures` names a *ForSequenceClassification class, else causal_lm (also when
// the key is absent). Throws ConfigError for a sequence classifier with num_labels (or id2label)
// other than 1: Ferry's score models have one output.
HfHead parse_hf_head(std::string_view json_text, const std::string& source);
HfHead read_hf_head(const std::filesystem::path& config_json);

// config.json text for `config` and `head` (see the top of this file for the architectures).
// Throws UserError when the family's config.json has no way to express the config (e.g. q/k/v bias
// without o bias under model_type llama, q/k norms outside qwen3, a sliding window outside mistral,
// or a score model with neither a pad nor an EOS id).
std::string format_hf_config(const ModelShape& config, HfHead head = HfHead::causal_lm);
// Writes format_hf_config(config, head) atomically.
void write_hf_config(const std::filesystem::path& config_json, const ModelShape& config,
                     HfHead head = HfHead::causal_lm);

}  // namespace ferry::io
