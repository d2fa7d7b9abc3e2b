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

std::vector<AttentionKind> gemma_layer_pattern(int64_t num_layers, int64_t pattern) {
  std::vector<AttentionKind> out;
  for (int64_t i = 0; i < num_layers; ++i) {
    out.push_back((i + 1) % pattern != 0 ? AttentionKind::sliding : AttentionKind::full);
  }
  return out;
}

void read_gemma_layer_types(const ConfigKeys& keys, ModelShape& c, int64_t default_pattern) {
  if (!keys.contains("sliding_window")) {
    c.sliding_window = 4096;
  } else {
    c.sliding_window = keys.has("sliding_window") ? keys.positive_int("sliding_window") : 0;
  }
  if (keys.has("layer_types")) {
    c.layer_types = read_layer_types(keys, c.num_hidden_layers);
  } else {
    c.layer_types = gemma_layer_pattern(c.num_hidden_layers, keys.positive_int("sliding_window_pattern", default_pattern));
  }
}

void write_gemma_keys(const ModelShape& c, nlohmann::json& out) {
  out["hidden_activation"] = "gelu_pytorch_tanh";
  // transformers 5 validates the type: an int (Gemma2Config / Gemma3TextConfig declare it so).
  const double scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim);
  out["query_pre_attn_scalar"] =
      scalar == std::floor(scalar) ? nlohmann::json(static_cast<int64_t>(scalar)) : nlohmann::json(scalar);
  const auto cap = [](double value) { return value > 0 ? nlohmann::json(value) : nlohmann::json(nullptr); };
  out["attn_logit_softcapping"] = cap(c.attn_logit_softcapping);
  out["final_logit_softcapping"] = cap(c.final_logit_softcapping);
  out["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr);
  out["layer_types"] = layer_type_names(c);
}

}  // namespace ferry
