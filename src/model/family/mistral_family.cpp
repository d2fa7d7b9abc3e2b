// Mistral: transformers' MistralConfig. A Llama block without biases, where every layer may attend
// a sliding window (`sliding_window`; null: full attention). llama.cpp reads it as "llama" (its
// converter writes Mistral so, without the window).
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) {
  // MistralConfig has no bias switches: no biases anywhere.
  c.attention_bias = c.attention_output_bias = c.mlp_bias = false;
  // sliding_window: null -> 0 (full attention); absent -> 4096, MistralConfig's default. Ferry
  // honours any window (src/model/attention_mask.h): it only masks once a sequence is longer.
  c.sliding_window = read_sliding_window(keys, 4096);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_llama_block(c, "mistral");
  require_expressible(c.qk_norm == QkNorm::none, "mistral", "q/k norms (only model_type qwen3 has them)");
  require_expressible(!c.attention_bias && !c.attention_output_bias && !c.mlp_bias, "mistral",
                      "biases: MistralConfig has none (model_type llama has attention_bias and mlp_bias)");
  require_expressible(c.layer_types.empty(), "mistral", "full and sliding layers mixed");
  out["sliding_window"] = sliding_window_json(c);
}

}  // namespace

const ModelFamily& mistral_family() {
  static const ModelFamily family{
      .name = "mistral",
      .model_types = {"mistral"},
      .causal_lm_class = "MistralForCausalLM",
      .score_class = "MistralForSequenceClassification",
      .gguf_architecture = "llama",
      .gguf_permutes_qk = true,
      .defaults = {.num_key_value_heads = 8, .max_position_embeddings = 131072},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = nullptr,
  };
  return family;
}

}  // namespace ferry
