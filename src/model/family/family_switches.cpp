// Checks and conversions the family descriptions share (see family_switches.h).
#include "src/model/family/family_switches.h"

#include "core/error.h"
#include "src/model/family/config_keys.h"

namespace ferry {

void require_expressible(bool ok, const std::string& family, const std::string& what) {
  if (!ok) throw UserError("cannot write a " + family + " config.json for a model with " + what);
}

void require_llama_block(const ModelShape& c, const std::string& family) {
  require_expressible(c.norm_placement == NormPlacement::pre, family, "norms after attention and MLP (Gemma, OLMo 2)");
  require_expressible(c.norm_weight == NormWeight::plain, family, "(1 + w) RMSNorm weights (Gemma)");
  require_expressible(c.mlp_activation == MlpActivation::silu, family, "a GELU MLP (Gemma)");
  require_expressible(!c.scale_embeddings, family, "embeddings scaled by sqrt(hidden_size) (Gemma)");
  require_expressible(c.query_pre_attn_scalar == 0, family, "query_pre_attn_scalar (Gemma)");
  require_expressible(c.attn_logit_softcapping == 0 && c.final_logit_softcapping == 0, family,
                      "logit soft-capping (Gemma 2)");
  require_expressible(c.partial_rotary_factor == 1.0, family, "partial rotary embeddings");
  require_expressible(c.rope_layers.empty(), family, "NoPE layers (SmolLM3)");
  require_expressible(c.sliding_rope_theta == 0, family, "a RoPE base of its own on sliding layers (Gemma 3)");
  require_expressible(c.qk_norm != QkNorm::whole, family, "q/k norms over the whole projection (OLMo 2)");
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

}  // namespace ferry

namespace ferry {

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
