// Checks and conversions the family descriptions share (see family_switches.h).
#include "src/model/family/family_switches.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/model/family/config_keys.h"
#include "src/model/family/gguf_metadata.h"

namespace ferry {

void require_expressible(bool ok, const std::string& family, const std::string& what) {
  if (!ok) throw UserError("cannot write a " + family + " config.json for a model with " + what);
}

void require_llama_block(const ModelShape& c, const std::string& family, bool allows_partial_rotary) {
  require_expressible(c.norm_placement == NormPlacement::pre, family, "norms after attention and MLP (Gemma, OLMo 2)");
  require_expressible(c.norm_weight == NormWeight::plain, family, "(1 + w) RMSNorm weights (Gemma)");
  require_expressible(c.mlp_activation == MlpActivation::silu, family, "a GELU MLP (Gemma)");
  require_expressible(!c.scale_embeddings, family, "embeddings scaled by sqrt(hidden_size) (Gemma)");
  require_expressible(c.query_pre_attn_scalar == 0, family, "query_pre_attn_scalar (Gemma)");
  require_expressible(c.attn_logit_softcapping == 0 && c.final_logit_softcapping == 0, family,
                      "logit soft-capping (Gemma 2)");
  require_expressible(allows_partial_rotary || c.partial_rotary_factor == 1.0, family, "partial rotary embeddings");
  require_expressible(c.rope_layers.empty(), family, "NoPE layers (SmolLM3)");
  require_expressible(c.sliding_rope_theta == 0, family, "a RoPE base of its own on sliding layers (Gemma 3)");
  require_expressible(c.qk_norm != QkNorm::whole, family, "q/k norms over the whole projection (OLMo 2)");
}

void require_llama_cpp(bool ok, const std::string& arch, const std::string& what) {
  if (!ok) {
    throw UserError("GGUF export: llama.cpp's " + arch + " runs " + what + "; this model differs, so llama.cpp would "
                    "not run it as transformers does (export it with --format hf)");
  }
}

int64_t read_gguf_sliding_window(const GgufMetadata& metadata, int64_t absent) {
  const int64_t window = metadata.get_int("attention.sliding_window", absent);
  if (window <= 0) {
    metadata.fail("metadata '" + metadata.architecture() + ".attention.sliding_window' = " + std::to_string(window) +
                  " must be positive");
  }
  return window;
}

int64_t read_sliding_window(const ConfigKeys& keys, int64_t absent) {
  if (!keys.contains("sliding_window")) return absent;
  return keys.has("sliding_window") ? keys.positive_int("sliding_window") : 0;
}

nlohmann::json sliding_window_json(const ModelShape& c) {
  return c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr);
}

std::vector<AttentionKind> sliding_layer_pattern(int64_t num_layers, int64_t period) {
  std::vector<AttentionKind> out;
  for (int64_t i = 0; i < num_layers; ++i) {
    out.push_back((i + 1) % period != 0 ? AttentionKind::sliding : AttentionKind::full);
  }
  return out;
}

std::vector<AttentionKind> read_layer_types(const ConfigKeys& keys, int64_t num_layers) {
  const nlohmann::json& types = keys.object().at("layer_types");
  if (!types.is_array()) keys.fail("layer_types", "must be a list, got " + types.dump());
  if (static_cast<int64_t>(types.size()) != num_layers) {
    keys.fail("layer_types", "has " + std::to_string(types.size()) + " entries for " + std::to_string(num_layers) +
                                 " layers (num_hidden_layers); it needs one per layer");
  }
  std::vector<AttentionKind> out;
  for (const nlohmann::json& type : types) {
    if (type == "full_attention") {
      out.push_back(AttentionKind::full);
    } else if (type == "sliding_attention") {
      out.push_back(AttentionKind::sliding);
    } else {
      keys.fail("layer_types", "holds " + type.dump() + "; Ferry runs full_attention and sliding_attention layers");
    }
  }
  return out;
}

std::vector<std::string> layer_type_names(const ModelShape& c) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    out.push_back(c.layer_slides(i) ? "sliding_attention" : "full_attention");
  }
  return out;
}

void write_rope_per_layer_type(const ModelShape& c, nlohmann::json& out) {
  const double sliding = c.sliding_rope_theta > 0 ? c.sliding_rope_theta : c.rope_theta;
  out["rope_parameters"] = {{"full_attention", out["rope_parameters"]},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", sliding}}}};
}

void refuse_sliding_layers(const ConfigKeys& keys) {
  if (keys.boolean("use_sliding_window", false)) {
    keys.fail("use_sliding_window", "is true; Ferry runs this family with full attention only (set it to false to "
                                    "train with full attention)");
  }
  if (!keys.has("layer_types")) return;
  const nlohmann::json& types = keys.object().at("layer_types");
  if (!types.is_array()) keys.fail("layer_types", "must be a list, got " + types.dump());
  for (const nlohmann::json& layer : types) {
    if (layer != "full_attention") {
      keys.fail("layer_types", "holds " + layer.dump() + "; Ferry runs this family with full_attention layers only");
    }
  }
}

}  // namespace ferry
