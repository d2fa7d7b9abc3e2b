// What Gemma 2 and Gemma 3 share, for their descriptions (gemma2_family.cpp, gemma3_family.cpp):
// the block's switches, the sliding-layer pattern and the config.json keys they write alike.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry {

class ConfigKeys;

// Sandwich norms with (1 + w) weights, GeGLU (tanh GELU), embeddings times sqrt(hidden_size).
void set_gemma_block(ModelShape& config);
// Throws UserError (family_switches.h) unless `config` has Gemma's block, a whole-head RoPE and no
// NoPE layers.
void require_gemma_block(const ModelShape& config, const std::string& family);

// sliding_window (absent: 4096; null: none) and layer_types (absent: sliding_window_pattern, else
// `default_pattern`) into `config`.
void read_gemma_layer_types(const ConfigKeys& keys, ModelShape& config, int64_t default_pattern);
// query_pre_attn_scalar, soft-capping, sliding_window, layer_types.
void write_gemma_keys(const ModelShape& config, nlohmann::json& out);

}  // namespace ferry
