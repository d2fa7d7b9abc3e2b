// Hugging Face config.json <-> LlamaConfig. Reads model_type "llama" and "qwen2" (q/k/v biases),
// both the older `rope_theta` + `rope_scaling` keys and the newer `rope_parameters` object, and
// writes what transformers 5 saves itself (plus the older rope keys, for older tools).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "src/model/llama_config.h"

namespace ferry::io {

// Throws InputError if the file cannot be read, ConfigError naming the file and key for a bad or
// unsupported value (an unknown model_type or rope type, a non-integer size, ...).
LlamaConfig read_hf_config(const std::filesystem::path& config_json);
// The same from text; `source` names it in error messages.
LlamaConfig parse_hf_config(std::string_view json_text, const std::string& source);

// config.json text for `config` (architectures LlamaForCausalLM, or Qwen2ForCausalLM for qwen2).
// Throws UserError when transformers has no way to express the config (e.g. q/k/v bias without o
// bias under model_type llama).
std::string format_hf_config(const LlamaConfig& config);
// Writes format_hf_config(config) atomically.
void write_hf_config(const std::filesystem::path& config_json, const LlamaConfig& config);

}  // namespace ferry::io
