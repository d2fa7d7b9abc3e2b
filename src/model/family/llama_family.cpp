// Llama (Llama 2, Llama 3.x, SmolLM2, TinyLlama, ...): transformers' LlamaConfig. Pre-norm blocks,
// SwiGLU, one attention_bias switch for q/k/v/o and an mlp_bias switch. llama.cpp's "llama" stores
// q/k rows in interleaved pairs.
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/gguf_metadata.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
  c.mlp_bias = keys.boolean("mlp_bias", false);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "llama");
  require_expressible(c.qk_norm == QkNorm::none, "llama", "q/k norms (self_attn.q_norm, k_norm): only model_type qwen3 has them (per head)");
  require_expressible(c.sliding_window == 0, "llama",
                      "a sliding window of " + std::to_string(c.sliding_window) + " on every layer: only model_type mistral has that");
  require_expressible(c.attention_bias == c.attention_output_bias, "llama",
                      "q/k/v biases but no o_proj bias; transformers' config has one attention_bias switch for all "
                      "four (use model_type qwen2 for q/k/v-only biases)");
  out["attention_bias"] = c.attention_bias;
  out["mlp_bias"] = c.mlp_bias;
}

// llama.cpp's llama with <arch>.expert_count > 0 is a Mixtral (its converter writes
// MixtralForCausalLM so): the Mixtral family reads it.
void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  if (metadata.get_int("expert_count", 0) > 0) mixtral_family().read_gguf(metadata, c);
}

}  // namespace

const ModelFamily& llama_family() {
  static const ModelFamily family{
      .name = "llama",
      .model_types = {"llama"},
      .causal_lm_class = "LlamaForCausalLM",
      .score_class = "LlamaForSequenceClassification",
      .gguf_architecture = "llama",
      .gguf_permutes_qk = true,
      .defaults = {},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
  };
  return family;
}

}  // namespace ferry
