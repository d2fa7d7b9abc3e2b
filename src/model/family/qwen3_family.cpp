// Qwen3: transformers' Qwen3Config. A Llama block with an RMSNorm over head_dim on every query and
// key head before RoPE, an explicit head_dim (default 128, not hidden / heads), one
// attention_bias switch for q/k/v/o, no MLP bias; full attention only. llama.cpp: "qwen3".
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
  c.mlp_bias = false;
  c.qk_norm = QkNorm::per_head;
  refuse_sliding_layers(keys);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "qwen3");
  if (c.qk_norm != QkNorm::per_head) {
    throw UserError("cannot write a qwen3 config.json for a model without q/k norms per head: every Qwen3 attention "
                    "layer has self_attn.q_norm and k_norm over head_dim");
  }
  require_expressible(c.sliding_window == 0, "qwen3", "a sliding window on every layer (only model_type mistral has that)");
  require_expressible(!c.mlp_bias, "qwen3", "MLP biases: Qwen3Config has none");
  require_expressible(c.attention_bias == c.attention_output_bias, "qwen3",
                      "q/k/v biases but no o_proj bias; Qwen3Config has one attention_bias switch for all four");
  out["attention_bias"] = c.attention_bias;
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
}

void read_gguf(const GgufMetadata&, ModelShape& c) { c.qk_norm = QkNorm::per_head; }

}  // namespace

const ModelFamily& qwen3_family() {
  static const ModelFamily family{
      .name = "qwen3",
      .model_types = {"qwen3"},
      .causal_lm_class = "Qwen3ForCausalLM",
      .score_class = "Qwen3ForSequenceClassification",
      .gguf_architecture = "qwen3",
      .gguf_permutes_qk = false,
      .defaults = {.num_key_value_heads = 32, .head_dim = 128, .max_position_embeddings = 32768, .bos_token_id = -1,
                   .eos_token_ids = {}},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
  };
  return family;
}

}  // namespace ferry
