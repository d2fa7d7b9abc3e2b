// Gemma 2 and Gemma 3's shared switches and keys (see gemma_block.h).
#include "src/model/family/gemma_block.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "src/model/family/config_keys.h"
#include "src/model/family/family_switches.h"

namespace ferry {

void set_gemma_block(ModelShape& c) {
  c.norm_placement = NormPlacement::sandwich;
  c.norm_weight = NormWeight::one_plus;
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.scale_embeddings = true;
  c.mlp_bias = false;
}

void require_gemma_block(const ModelShape& c, const std::string& family) {
  require_expressible(c.norm_placement == NormPlacement::sandwich, family, "other norms than Gemma's four per block");
  require_expressible(c.norm_weight == NormWeight::one_plus, family, "plain RMSNorm weights (Gemma's are 1 + w)");
  require_expressible(c.mlp_activation == MlpActivation::gelu_tanh, family, "a SiLU MLP (Gemma's is GeGLU)");
  require_expressible(c.scale_embeddings, family, "unscaled embeddings");
  require_expressible(!c.mlp_bias, family, "MLP biases");
  require_expressible(c.partial_rotary_factor == 1.0, family, "partial rotary embeddings");
  require_expressible(c.rope_layers.empty(), family, "NoPE layers (SmolLM3)");
}

void read_gemma_layer_types(const ConfigKeys& keys, ModelShape& c, int64_t default_pattern) {
  c.sliding_window = read_sliding_window(keys, 4096);
  c.layer_types = keys.has("layer_types")
                      ? read_layer_types(keys, c.num_hidden_layers)
                      : sliding_layer_pattern(c.num_hidden_layers, keys.positive_int("sliding_window_pattern", default_pattern));
}

void write_gemma_keys(const ModelShape& c, nlohmann::json& out) {
  // transformers 5 validates the type: an int (Gemma2Config / Gemma3TextConfig declare it so).
  const double scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim);
  out["query_pre_attn_scalar"] =
      scalar == std::floor(scalar) ? nlohmann::json(static_cast<int64_t>(scalar)) : nlohmann::json(scalar);
  const auto cap = [](double value) { return value > 0 ? nlohmann::json(value) : nlohmann::json(nullptr); };
  out["attn_logit_softcapping"] = cap(c.attn_logit_softcapping);
  out["final_logit_softcapping"] = cap(c.final_logit_softcapping);
  out["sliding_window"] = sliding_window_json(c);
  out["layer_types"] = layer_type_names(c);
}

}  // namespace ferry
