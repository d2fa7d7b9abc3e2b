// The checks every model load runs before anything is allocated: the weight files' headers against
// the tensors the config implies (src/model/family/model_tensors.h: names, shapes and the config
// keys behind each dimension), so a config.json that disagrees with its weights is an error naming
// the key, never a huge allocation; and the model's size against the host's free memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry::io {

class HfWeights;

// Before a model is built from `config` (read from `config_file`): every tensor of `weights` that
// the specs name has the spec's shape (float tensors; a bitsandbytes NF4 weight by its packed size,
// int8 by its shape), and the last decoder layer's tensors exist. Throws InputError naming
// config_file, the key, its value and the shape the weight file has.
void check_weights_match_config(const ModelShape& config, const HfWeights& weights,
                                const std::filesystem::path& config_file);

// Before a model of `config` is built in host memory with `bytes_per_parameter` per parameter
// (plus `extra_bytes`, e.g. a copy of the weight files): throws InputError with the figures
// (needed vs MemAvailable) when it cannot fit. `available` overrides MemAvailable (tests); where
// neither is known nothing is checked. `what` names the model in the message.
void check_model_fits_host(const ModelShape& config, uint64_t bytes_per_parameter, uint64_t extra_bytes,
                           const std::string& what, uint64_t available = 0);

}  // namespace ferry::io
