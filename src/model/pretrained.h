// Models from and to Hugging Face folders (config.json + model.safetensors or shards).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>

#include "src/model/model_heads.h"

namespace ferry {

namespace io {
class HfWeights;
}

// Reads <dir>/config.json and the weights; the model is in `dtype` on `device`, in eval mode.
// Throws InputError/ConfigError naming the folder when files are missing or do not fit.
CausalLM causal_lm_from_pretrained(const std::filesystem::path& dir, at::ScalarType dtype = at::kFloat,
                                           c10::Device device = c10::Device(c10::kCPU));

// As above for a score model (reward model, critic). With `from_causal_lm`, the folder may hold a
// causal LM instead: its lm_head is dropped and score.weight is initialised ~ N(0, 0.02) from
// `seed`, as transformers does when a sequence classifier starts from a base model.
ScoreModel score_model_from_pretrained(const std::filesystem::path& dir, at::ScalarType dtype = at::kFloat,
                                          c10::Device device = c10::Device(c10::kCPU), bool from_causal_lm = false,
                                          uint64_t seed = 0);

// Host bytes per parameter while a model is built in `dtype`: modules are made in float32 and then
// converted, so both copies exist for a moment.
uint64_t build_bytes_per_parameter(at::ScalarType dtype);

// What every load of a model folder runs before building the model: config.json's shapes against
// the weight files' headers (io::check_weights_match_config), and the model in `dtype` plus a copy
// of the weights against the host's free memory (io::check_model_fits_host). Throws InputError.
void check_model_folder(const ModelShape& config, const io::HfWeights& weights, const std::filesystem::path& dir,
                        at::ScalarType dtype);

// Writes config.json and the parameters (safetensors, sharded above max_shard_bytes if non-zero).
// A ScoreModel is written as its family's *ForSequenceClassification (Llama..., Qwen3...) with one label,
// any other model as a causal LM (see src/io/hf_config.h).
void save_pretrained(const torch::nn::Module& model, const ModelShape& config, const std::filesystem::path& dir,
                     uint64_t max_shard_bytes = 0);

}  // namespace ferry
