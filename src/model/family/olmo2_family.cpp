// OLMo 2: transformers' Olmo2Config. Norms after attention and after the MLP instead of before
// (post_attention_layernorm, post_feedforward_layernorm), RMSNorms of the queries and keys over the
// whole projection (not per head) before RoPE, one attention_bias switch. llama.cpp: "olmo2".
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/olmo_block.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) { set_olmo_block(keys, c); }

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_olmo_block(c, "olmo2");
  require_expressible(c.sliding_window == 0, "olmo2", "a sliding window (OLMo 3 has them: model_type olmo3)");
  out["attention_bias"] = c.attention_bias;
}

void read_gguf(const GgufMetadata&, ModelShape& c) { set_olmo_switches(c); }

}  // namespace

const ModelFamily& olmo2_family() {
  static const ModelFamily family{
      .name = "olmo2",
      .model_types = {"olmo2"},
      .causal_lm_class = "Olmo2ForCausalLM",
      .score_class = "Olmo2ForSequenceClassification",
      .gguf_architecture = "olmo2",
      .gguf_permutes_qk = false,
      .defaults = kOlmoDefaults,
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
  };
  return family;
}

}  // namespace ferry
