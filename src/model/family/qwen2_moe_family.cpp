// Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): transformers' Qwen2MoeConfig. Qwen2's attention
// (q/k/v biases, qkv_bias) with a Mixture-of-Experts MLP: a softmax router over num_experts experts,
// num_experts_per_tok of them per token, plus a shared expert every token runs
// (shared_expert_intermediate_size wide) whose output is gated by sigmoid(shared_expert_gate(x)).
// decoder_sparse_step and mlp_only_layers leave some layers dense. Full attention only.
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/moe_gguf.h"
#include "src/model/family/moe_keys.h"

namespace ferry {
namespace {

const MoeKeys kKeys{.num_experts = 60, .experts_per_token = 4, .width = 1408, .normalize = false,
                    .shared_expert = true, .shared_width = 5632};

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = keys.boolean("qkv_bias", true);
  c.attention_output_bias = false;
  c.mlp_bias = false;
  refuse_sliding_layers(keys);
  read_moe_keys(keys, kKeys, c);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "qwen2_moe");
  require_expressible(c.qk_norm == QkNorm::none, "qwen2_moe", "q/k norms (model_type qwen3_moe has them)");
  require_expressible(c.sliding_window == 0, "qwen2_moe", "a sliding window");
  require_expressible(!c.attention_output_bias && !c.mlp_bias, "qwen2_moe",
                      "o_proj or MLP biases: Qwen2-MoE has q/k/v biases only (qkv_bias)");
  out["qkv_bias"] = c.attention_bias;
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
  write_moe_keys(c, kKeys, "qwen2_moe", out);
}

// llama.cpp's qwen2moe: top-k weights as softmax gives them (norm_w false), the shared expert, q and o
// n_embd x n_embd, output.weight required.
const MoeGgufRules kGguf{.architecture = "qwen2moe", .expert_width_key = true, .shared_expert = true,
                         .normalize_top_k = false, .needs_output = true, .square_attention = true,
                         .aux_loss_coef = kKeys.aux_loss_coef};

void read_gguf(const GgufMetadata& metadata, ModelShape& c) { read_moe_gguf(metadata, kGguf, c); }

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(c.attention_bias && !c.attention_output_bias, "qwen2moe", "q/k/v biases (qkv_bias true)");
  return write_moe_gguf(c, kGguf);
}

}  // namespace

const ModelFamily& qwen2_moe_family() {
  static const ModelFamily family{
      .name = "qwen2_moe",
      .model_types = {"qwen2_moe"},
      .causal_lm_class = "Qwen2MoeForCausalLM",
      .score_class = "Qwen2MoeForSequenceClassification",
      .gguf_architecture = "qwen2moe",
      .gguf_permutes_qk = false,
      .defaults = {.num_key_value_heads = 16, .max_position_embeddings = 32768, .bos_token_id = -1, .eos_token_ids = {},
                   .has_head_dim_key = false},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
      .experts = true,
  };
  return family;
}

}  // namespace ferry
