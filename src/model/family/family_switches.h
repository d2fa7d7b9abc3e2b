// Small checks the family descriptions share: a family's config.json writer refuses a ModelShape
// whose switches that family cannot express (a Llama with Gemma's norms, a Qwen3 without q/k
// norms), naming the switch, so an export never writes a config.json that loads as another model.
#pragma once

#include <string>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry {

// Throws UserError "cannot write a <family> config.json for a model with <what>" unless `ok`.
void require_expressible(bool ok, const std::string& family, const std::string& what);

// The switches of a plain Llama-style block (pre-norms, plain RMSNorm weights, SiLU, no embedding
// scale, no soft-capping, no query_pre_attn_scalar, every layer rotating its whole head, one RoPE):
// throws as require_expressible for the first one `config` changes.
void require_llama_block(const ModelShape& config, const std::string& family);

// config.json's layer_types ("full_attention" / "sliding_attention" per layer) -> AttentionKind;
// ConfigError naming the key for another value or a wrong length.
class ConfigKeys;
std::vector<AttentionKind> read_layer_types(const ConfigKeys& keys, int64_t num_layers);
// AttentionKind per layer -> config.json's layer_types, for `num_layers` layers (empty: all full).
std::vector<std::string> layer_type_names(const ModelShape& config);

}  // namespace ferry

namespace ferry {

// Qwen2 / Qwen3: sliding-window layers (use_sliding_window true, or layer_types other than
// full_attention) are refused naming the key; Ferry runs these families with full attention.
void refuse_sliding_layers(const ConfigKeys& keys);

}  // namespace ferry
