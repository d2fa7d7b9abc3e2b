// What the family descriptions share: a family's config.json writer refuses a ModelShape whose
// switches that family cannot express (a Llama with Gemma's norms, a Qwen3 without q/k norms),
// naming the switch, so an export never writes a config.json that loads as another model; its GGUF
// writer refuses one llama.cpp would run otherwise; and the sliding-window keys several families
// read and write alike.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry {

class ConfigKeys;

// Throws UserError "cannot write a <family> config.json for a model with <what>" unless `ok`.
void require_expressible(bool ok, const std::string& family, const std::string& what);

// The switches of a plain Llama-style block (pre-norms, plain RMSNorm weights, SiLU, no embedding
// scale, no soft-capping, no query_pre_attn_scalar, every layer rotating its whole head unless
// `allows_partial_rotary` (Phi-3), one RoPE): throws as require_expressible for the first one
// `config` changes.
void require_llama_block(const ModelShape& config, const std::string& family, bool allows_partial_rotary = false);

// Throws UserError "GGUF export: llama.cpp's <arch> runs <what>; this model differs ..." unless
// `ok`: llama.cpp fixes some of a family's settings in its code, not in the file.
void require_llama_cpp(bool ok, const std::string& arch, const std::string& what);

// GGUF's <arch>.attention.sliding_window (absent: `absent`); InputError (the file's) unless positive.
class GgufMetadata;
int64_t read_gguf_sliding_window(const GgufMetadata& metadata, int64_t absent);
// config.json's sliding_window: absent -> `absent` (the config class's default), null -> 0 (none).
int64_t read_sliding_window(const ConfigKeys& keys, int64_t absent);
// sliding_window as config.json writes it: the window, or null for none.
nlohmann::json sliding_window_json(const ModelShape& config);

// Layer i slides unless (i + 1) is a multiple of `period` (transformers' sliding_window_pattern:
// Gemma 2: 2, Gemma 3: 6, OLMo 3: 4).
std::vector<AttentionKind> sliding_layer_pattern(int64_t num_layers, int64_t period);
// config.json's layer_types ("full_attention" / "sliding_attention" per layer) -> AttentionKind;
// ConfigError naming the key for another value or a wrong length.
std::vector<AttentionKind> read_layer_types(const ConfigKeys& keys, int64_t num_layers);
// AttentionKind per layer -> config.json's layer_types.
std::vector<std::string> layer_type_names(const ModelShape& config);

// transformers 5's per-layer-type rope_parameters: `out["rope_parameters"]` (the full layers',
// written by the shared keys) becomes {"full_attention": it, "sliding_attention": plain RoPE with
// the sliding layers' base}.
void write_rope_per_layer_type(const ModelShape& config, nlohmann::json& out);

// Qwen2 / Qwen3: sliding-window layers (use_sliding_window true, or layer_types other than
// full_attention) are refused naming the key; Ferry runs these families with full attention.
void refuse_sliding_layers(const ConfigKeys& keys);

}  // namespace ferry
