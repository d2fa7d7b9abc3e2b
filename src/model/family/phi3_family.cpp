// Phi-3, Phi-3.5, Phi-4 and Phi-4-mini: transformers' Phi3Config. A Llama block whose projections
// are fused: self_attn.qkv_proj (query, key and value rows stacked) and mlp.gate_up_proj (gate rows,
// then up rows), LoRA on the fused ones as PEFT names them; partial rotary embeddings
// (partial_rotary_factor, Phi-4-mini 0.75); LongRoPE (rope_scaling type longrope, short and long
// factors, original_max_position_embeddings at the top level); a sliding window on every layer
// (Phi-3-mini-4k: 2047; null for Phi-4). llama.cpp: "phi3", with the LongRoPE factors as the
// tensors rope_factors_long / rope_factors_short.
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/gguf_metadata.h"

namespace ferry {
namespace {

void check_longrope_factors(const ModelShape& c, const auto& fail) {
  const RopeScaling& s = c.rope_scaling;
  if (s.type != RopeScalingType::longrope) return;
  const auto expected = static_cast<size_t>(c.rotary_dim() / 2);
  if (s.long_factor.size() != expected) fail("long_factor", s.long_factor.size(), expected);
  if (s.short_factor.size() != expected) fail("short_factor", s.short_factor.size(), expected);
}

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.fused_projections = true;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = false;  // Phi3Config has no bias switches
  // Phi3Config always has original_max_position_embeddings (default 4096), and it wins over the
  // one inside rope_scaling.
  if (c.rope_scaling.type == RopeScalingType::longrope) {
    c.rope_scaling.original_max_position_embeddings = keys.positive_int("original_max_position_embeddings", 4096);
  } else if (c.rope_scaling.type != RopeScalingType::none) {
    keys.fail("rope_scaling", "is not longrope; Phi3Config runs default RoPE or longrope only");
  }
  const std::string container = keys.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  check_longrope_factors(c, [&](const char* key, size_t got, size_t want) {
    keys.fail(container + "." + key, "has " + std::to_string(got) + " values; this model rotates " +
                                         std::to_string(c.rotary_dim()) + " channels per head, so it needs " +
                                         std::to_string(want));
  });
  c.sliding_window = read_sliding_window(keys, 0);  // Phi3Config's default: None
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "phi3", /*allows_partial_rotary=*/true);
  require_expressible(c.fused_projections, "phi3", "separate q/k/v and gate/up projections (Phi-3 fuses them)");
  require_expressible(c.qk_norm == QkNorm::none, "phi3", "q/k norms");
  require_expressible(!c.attention_bias && !c.attention_output_bias && !c.mlp_bias, "phi3", "biases: Phi3Config has none");
  require_expressible(c.layer_types.empty(), "phi3", "full and sliding layers mixed");
  require_expressible(c.rope_scaling.type == RopeScalingType::none || c.rope_scaling.type == RopeScalingType::longrope,
                      "phi3", "rope scaling other than longrope");
  out["sliding_window"] = sliding_window_json(c);
  out["original_max_position_embeddings"] = c.rope_scaling.type == RopeScalingType::longrope
                                                ? c.rope_scaling.original_max_position_embeddings
                                                : c.max_position_embeddings;
  out["resid_pdrop"] = 0.0;
  out["embd_pdrop"] = 0.0;
}

void read_gguf(const GgufMetadata& m, ModelShape& c) {
  c.fused_projections = true;
  const int64_t window = m.get_int("attention.sliding_window", 0);  // 0: none (Phi-4)
  if (window < 0) m.fail("metadata 'phi3.attention.sliding_window' is negative");
  c.sliding_window = window;
  const std::vector<double> long_factor = m.float_tensor("rope_factors_long.weight");
  const std::vector<double> short_factor = m.float_tensor("rope_factors_short.weight");
  if (long_factor.empty() != short_factor.empty()) {
    m.fail("holds only one of the tensors rope_factors_long.weight and rope_factors_short.weight; LongRoPE needs both");
  }
  if (long_factor.empty()) return;
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::longrope;
  s.long_factor = long_factor;
  s.short_factor = short_factor;
  s.original_max_position_embeddings = m.get_int("rope.scaling.original_context_length", 0);
  if (s.original_max_position_embeddings <= 0) {
    m.fail("has LongRoPE factors but no positive 'phi3.rope.scaling.original_context_length'");
  }
  s.attention_factor = m.get_float("rope.scaling.attn_factor", 0.0);
  check_longrope_factors(c, [&](const char* key, size_t got, size_t want) {
    m.fail(std::string("tensor 'rope_factors_") + (key[0] == 'l' ? "long" : "short") + ".weight' has " +
           std::to_string(got) + " values; rope.dimension_count needs " + std::to_string(want));
  });
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  std::vector<GgufKey> keys{{"attention.sliding_window", GgufKey::Type::u32, static_cast<double>(c.sliding_window)}};
  const bool longrope = c.rope_scaling.type == RopeScalingType::longrope;
  keys.push_back({"rope.scaling.original_context_length", GgufKey::Type::u32,
                  static_cast<double>(longrope ? c.rope_scaling.original_max_position_embeddings
                                               : c.max_position_embeddings)});
  if (longrope) keys.push_back({"rope.scaling.attn_factor", GgufKey::Type::f32, c.rope_attention_scaling()});
  return keys;
}

}  // namespace

const ModelFamily& phi3_family() {
  static const ModelFamily family{
      .name = "phi3",
      .model_types = {"phi3"},
      .causal_lm_class = "Phi3ForCausalLM",
      .score_class = "Phi3ForSequenceClassification",
      .gguf_architecture = "phi3",
      .gguf_permutes_qk = false,
      .defaults = {.max_position_embeddings = 4096,
                   .rms_norm_eps = 1e-5,
                   .eos_token_ids = {32000},
                   .pad_token_id = 32000,
                   .has_head_dim_key = false},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
  };
  return family;
}

}  // namespace ferry
