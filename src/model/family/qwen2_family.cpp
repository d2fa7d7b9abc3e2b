// Qwen2 / Qwen2.5: transformers' Qwen2Config. A Llama block with q/k/v biases (always) and no
// o_proj or MLP bias; full attention only. llama.cpp's "qwen2" keeps Hugging Face's row order.
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = true;
  c.attention_output_bias = false;
  c.mlp_bias = false;
  refuse_sliding_layers(keys);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "qwen2");
  require_expressible(c.qk_norm == QkNorm::none, "qwen2", "q/k norms (only model_type qwen3 has them)");
  require_expressible(c.sliding_window == 0, "qwen2", "a sliding window on every layer (only model_type mistral has that)");
  require_expressible(c.attention_bias && !c.attention_output_bias && !c.mlp_bias, "qwen2",
                      "other biases than q/k/v: Qwen2 models have q/k/v biases and no o_proj or MLP biases");
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
}

void read_gguf(const GgufMetadata&, ModelShape& c) {
  c.attention_bias = true;
  c.attention_output_bias = false;
}

}  // namespace

const ModelFamily& qwen2_family() {
  static const ModelFamily family{
      .name = "qwen2",
      .model_types = {"qwen2"},
      .causal_lm_class = "Qwen2ForCausalLM",
      .score_class = "Qwen2ForSequenceClassification",
      .gguf_architecture = "qwen2",
      .gguf_permutes_qk = false,
      .defaults = {.num_key_value_heads = 32, .max_position_embeddings = 32768, .bos_token_id = -1, .eos_token_ids = {}},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
  };
  return family;
}

}  // namespace ferry
