// Hugging Face config.json <-> LlamaConfig. Reads model_type "llama" (also SmolLM2), "mistral"
// (no biases; `sliding_window`, honoured), "qwen2" (q/k/v biases) and "qwen3" (q/k RMSNorms, an
// explicit head_dim), both the older `rope_theta` + `rope_scaling` keys and the newer
// `rope_parameters` object, and writes what transformers 5 saves itself (plus the older rope keys,
// for older tools).
//
// `architectures` names the class transformers' Auto* loaders build: a causal LM is written as
// <Family>ForCausalLM (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM);
// a score model (reward model, critic: `score.weight`, one output) as
// <Family>ForSequenceClassification with num_labels 1 (id2label {"0": "LABEL_0"}, label2id
// {"LABEL_0": 0}, as transformers writes them), so AutoModelForSequenceClassification loads it.
// transformers scores each row at its last token that is not pad_token_id, so a score config
// always carries one: the model's pad id, else its first EOS id (then a row that ends with EOS is
// scored one token early by transformers: right-pad with a real pad id, or left-pad).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/config/llama_config.h"

namespace ferry::io {

// Throws InputError if the file cannot be read, ConfigError naming the file and key for a bad or
// unsupported value (an unknown model_type, architectures class or rope type, a non-integer size,
// Qwen sliding-window layers, ...), listing what is supported, and InputError for a
// `quantization_config` Ferry cannot read (anything but bitsandbytes 4-bit nf4: hf_quantization.h).
LlamaConfig read_hf_config(const std::filesystem::path& config_json);
// The same from text; `source` names it in error messages.
LlamaConfig parse_hf_config(std::string_view json_text, const std::string& source);

// The head a config.json is for: causal_lm (logits, `lm_head.weight`) or score (one value per
// token, `score.weight`: HF *ForSequenceClassification with num_labels 1).
enum class HfHead { causal_lm, score };

// score when `architectures` names a *ForSequenceClassification class, else causal_lm (also when
// the key is absent). Throws ConfigError for a sequence classifier with num_labels (or id2label)
// other than 1: Ferry's score models have one output.
HfHead parse_hf_head(std::string_view json_text, const std::string& source);
HfHead read_hf_head(const std::filesystem::path& config_json);

// config.json text for `config` and `head` (see the top of this file for the architectures).
// Throws UserError when transformers has no way to express the config (e.g. q/k/v bias without o
// bias under model_type llama, q/k norms outside qwen3, a sliding window outside mistral, or a
// score model with neither a pad nor an EOS id).
std::string format_hf_config(const LlamaConfig& config, HfHead head = HfHead::causal_lm);
// Writes format_hf_config(config, head) atomically.
void write_hf_config(const std::filesystem::path& config_json, const LlamaConfig& config,
                     HfHead head = HfHead::causal_lm);

}  // namespace ferry::io
