// OLMoE (OLMoE-1B-7B): transformers' OlmoeConfig. A Llama block (norms before attention and MLP)
// with RMSNorms over the whole query and key projections (as OLMo 2's, but pre-norm), one
// attention_bias switch for q/k/v/o, and a Mixture-of-Experts MLP in every layer: num_experts
// experts, intermediate_size wide, num_experts_per_tok per token (norm_topk_prob off by default).
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/moe_gguf.h"
#include "src/model/family/moe_keys.h"

namespace ferry {
namespace {

const MoeKeys kKeys{.width_key = "intermediate_size", .num_experts = 64, .experts_per_token = 8, .width = 2048,
                    .normalize = false, .sparse_step_keys = false, .aux_loss_coef = 0.01};

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = c.attention_output_bias = keys.boolean("attention_bias", false);
  c.mlp_bias = false;
  c.qk_norm = QkNorm::whole;
  if (keys.has("clip_qkv")) {
    keys.fail("clip_qkv", "is " + keys.object().at("clip_qkv").dump() + "; Ferry runs OLMoE without q/k/v clipping (null)");
  }
  read_moe_keys(keys, kKeys, c);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_expressible(c.norm_placement == NormPlacement::pre && c.norm_weight == NormWeight::plain &&
                          c.mlp_activation == MlpActivation::silu && !c.scale_embeddings,
                      "olmoe", "another block than OLMoE's (pre-norms, plain RMSNorm weights, SiLU)");
  require_expressible(c.qk_norm == QkNorm::whole, "olmoe", "q/k norms other than over the whole projection");
  require_expressible(c.sliding_window == 0 && c.rope_layers.empty() && c.partial_rotary_factor == 1.0, "olmoe",
                      "a sliding window, NoPE layers or partial rotary embeddings");
  require_expressible(!c.mlp_bias && c.attention_bias == c.attention_output_bias, "olmoe",
                      "biases other than one attention_bias switch for q/k/v/o");
  out["attention_bias"] = c.attention_bias;
  out["clip_qkv"] = nullptr;
  write_moe_keys(c, kKeys, "olmoe", out);
}

// llama.cpp's olmoe: top-k weights as softmax gives them (norm_w false), q/o and both q/k norms
// n_embd wide (no grouped-query attention), output.weight required, no biases.
const MoeGgufRules kGguf{.architecture = "olmoe", .normalize_top_k = false, .needs_output = true,
                         .square_attention = true, .full_kv_heads = true, .aux_loss_coef = kKeys.aux_loss_coef};

void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  c.qk_norm = QkNorm::whole;
  read_moe_gguf(metadata, kGguf, c);
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(!c.attention_bias && !c.attention_output_bias, "olmoe", "attention without biases");
  return write_moe_gguf(c, kGguf);
}

}  // namespace

const ModelFamily& olmoe_family() {
  static const ModelFamily family{
      .name = "olmoe",
      .model_types = {"olmoe"},
      .causal_lm_class = "OlmoeForCausalLM",
      .score_class = "OlmoeForSequenceClassification",
      .gguf_architecture = "olmoe",
      .gguf_permutes_qk = false,
      .defaults = {.max_position_embeddings = 4096, .rms_norm_eps = 1e-5, .bos_token_id = -1,
                   .eos_token_ids = {50279}, .pad_token_id = 1, .has_head_dim_key = false},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
      .experts = true,
  };
  return family;
}

}  // namespace ferry
