// The weights a Hugging Face Llama-family folder holds for a config.json: each tensor's name, shape
// and the config keys its dimensions come from, in the order llama.cpp's converter writes them. The
// one list of them: GGUF export maps it to llama.cpp's names, and every model load compares it with
// the weight files' headers before anything is allocated, so a config.json that disagrees with its
// weights is an error naming the key, never a huge allocation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config/llama_config.h"

namespace ferry::io {

class HfWeights;

struct HfTensorSpec {
  std::string name;                // "model.layers.3.mlp.gate_proj.weight"
  int64_t layer = -1;              // its decoder layer, -1 outside the layers
  std::string suffix;              // the name after "model.layers.<layer>." ("mlp.gate_proj.weight")
  std::vector<int64_t> shape;
  std::vector<std::string> dims;   // the config.json key(s) behind each dimension
};

// Embedding, every layer, final norm, and lm_head unless the embeddings are tied.
std::vector<HfTensorSpec> hf_tensor_specs(const LlamaConfig& config);

// Before a model is built from `config` (read from `config_file`): every tensor of `weights` that
// the specs name has the spec's shape (float tensors; a bitsandbytes NF4 weight by its packed size,
// int8 by its shape), and the last decoder layer's tensors exist. Throws InputError naming
// config_file, the key, its value and the shape the weight file has.
void check_weights_match_config(const LlamaConfig& config, const HfWeights& weights,
                                const std::filesystem::path& config_file);

// Before a model of `config` is built in host memory with `bytes_per_parameter` per parameter
// (plus `extra_bytes`, e.g. a copy of the weight files): throws InputError with the figures
// (needed vs MemAvailable) when it cannot fit. `available` overrides MemAvailable (tests); where
// neither is known nothing is checked. `what` names the model in the message.
void check_model_fits_host(const LlamaConfig& config, uint64_t bytes_per_parameter, uint64_t extra_bytes,
                           const std::string& what, uint64_t available = 0);

}  // namespace ferry::io
