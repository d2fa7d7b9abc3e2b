// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B): transformers' Qwen3MoeConfig.
// Qwen3's attention (q/k RMSNorms per head, one attention_bias switch) with a Mixture-of-Experts MLP
// in the sparse layers: a softmax router picks num_experts_per_tok of num_experts experts
// (moe_intermediate_size wide), norm_topk_prob renormalises their weights; decoder_sparse_step and
// mlp_only_layers leave some layers dense (intermediate_size wide). Full attention only.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/moe_gguf.h"
#include "src/model/family/moe_keys.h"

namespace ferry {
namespace {

const MoeKeys kKeys{.num_experts = 128, .experts_per_token = 8, .width = 768, .normalize = false};

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
  c.mlp_bias = false;
  c.qk_norm = QkNorm::per_head;
  refuse_sliding_layers(keys);
  read_moe_keys(keys, kKeys, c);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "qwen3_moe");
  require_expressible(c.qk_norm == QkNorm::per_head, "qwen3_moe", "no q/k norms per head (every Qwen3-MoE layer has them)");
  require_expressible(c.sliding_window == 0, "qwen3_moe", "a sliding window");
  require_expressible(!c.mlp_bias && c.attention_bias == c.attention_output_bias, "qwen3_moe",
                      "biases other than one attention_bias switch for q/k/v/o");
  out["attention_bias"] = c.attention_bias;
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
  write_moe_keys(c, kKeys, "qwen3_moe", out);
}

// llama.cpp's qwen3moe always renormalises the chosen experts' weights (norm_w true).
const MoeGgufRules kGguf{.architecture = "qwen3moe", .expert_width_key = true, .normalize_top_k = true,
                         .aux_loss_coef = kKeys.aux_loss_coef};

void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  c.qk_norm = QkNorm::per_head;
  read_moe_gguf(metadata, kGguf, c);
}

std::vector<GgufKey> write_gguf(const ModelShape& c) { return write_moe_gguf(c, kGguf); }

}  // namespace

const ModelFamily& qwen3_moe_family() {
  static const ModelFamily family{
      .name = "qwen3_moe",
      .model_types = {"qwen3_moe"},
      .causal_lm_class = "Qwen3MoeForCausalLM",
      .score_class = "Qwen3MoeForSequenceClassification",
      .gguf_architecture = "qwen3moe",
      .gguf_permutes_qk = false,
      .defaults = {.num_key_value_heads = 4, .max_position_embeddings = 32768, .bos_token_id = -1, .eos_token_ids = {}},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
      .experts = true,
  };
  return family;
}

}  // namespace ferry
