// Mixtral (Mixtral-8x7B, 8x22B): transformers' MixtralConfig. Mistral's block (no biases, an
// optional sliding window on every layer) whose every MLP is num_local_experts experts
// (intermediate_size wide), num_experts_per_tok of them per token, their softmax weights always
// renormalised. Checkpoints name the block `block_sparse_moe` and the experts' projections w1
// (gate), w3 (up) and w2 (down).
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/moe_gguf.h"
#include "src/model/family/moe_keys.h"

namespace ferry {
namespace {

const MoeKeys kKeys{.width_key = "intermediate_size", .num_experts = 8, .experts_per_token = 2, .width = 14336,
                    .normalize_key = false, .normalize = true, .sparse_step_keys = false};

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = c.attention_output_bias = c.mlp_bias = false;
  c.sliding_window = read_sliding_window(keys, 0);
  if (keys.has("router_jitter_noise") && keys.object().at("router_jitter_noise") != 0) {
    keys.fail("router_jitter_noise", "is " + keys.object().at("router_jitter_noise").dump() +
                                         "; Ferry trains Mixtral without router jitter: set it to 0");
  }
  read_moe_keys(keys, kKeys, c);
  c.moe.naming = ExpertNaming::mixtral;
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "mixtral");
  require_expressible(c.qk_norm == QkNorm::none, "mixtral", "q/k norms");
  require_expressible(!c.attention_bias && !c.attention_output_bias && !c.mlp_bias, "mixtral", "biases");
  require_expressible(c.layer_types.empty(), "mixtral", "full and sliding layers mixed");
  require_expressible(c.moe.naming == ExpertNaming::mixtral, "mixtral", "experts named mlp.experts.N.gate_proj");
  out["sliding_window"] = sliding_window_json(c);
  out["router_jitter_noise"] = 0.0;
  write_moe_keys(c, kKeys, "mixtral", out);
}

// llama.cpp's llama with expert_count > 0 (the converter registers MixtralForCausalLM on LlamaModel):
// renormalised top-k weights (norm_w true), experts feed_forward_length wide, no sliding window.
const MoeGgufRules kGguf{.architecture = "llama", .normalize_top_k = true, .aux_loss_coef = kKeys.aux_loss_coef};

// Reached from the llama family's read_gguf when the file has experts.
void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  c.model_type = "mixtral";
  c.sliding_window = 0;
  read_moe_gguf(metadata, kGguf, c);
  c.moe.naming = ExpertNaming::mixtral;
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(!c.attention_bias && !c.attention_output_bias && !c.mlp_bias, "llama",
                    "Mixtral without biases");
  return write_moe_gguf(c, kGguf);
}

}  // namespace

const ModelFamily& mixtral_family() {
  static const ModelFamily family{
      .name = "mixtral",
      .model_types = {"mixtral"},
      .causal_lm_class = "MixtralForCausalLM",
      .score_class = "MixtralForSequenceClassification",
      .gguf_architecture = "llama",  // with expert_count: the llama family's read_gguf hands the file here
      .gguf_permutes_qk = true,
      .defaults = {.num_key_value_heads = 8, .max_position_embeddings = 131072, .rms_norm_eps = 1e-5,
                   .rope_theta = 1e6, .has_head_dim_key = false},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
      .experts = true,
  };
  return family;
}

}  // namespace ferry
