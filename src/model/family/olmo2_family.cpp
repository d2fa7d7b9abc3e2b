// OLMo 2: transformers' Olmo2Config. Norms after attention and after the MLP instead of before
// (post_attention_layernorm, post_feedforward_layernorm), RMSNorms of the queries and keys over the
// whole projection (not per head) before RoPE, one attention_bias switch. llama.cpp: "olmo2" (which
// also holds OLMo 3: see read_gguf).
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/gguf_metadata.h"
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

// llama.cpp's converter writes OLMo 3 as "olmo2" too, with attention.sliding_window and
// attention.sliding_window_pattern (true: the layer slides): such a file is an OLMo 3.
void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  set_olmo_switches(c);
  if (metadata.get_int("attention.sliding_window", 0) <= 0) return;
  c.model_type = "olmo3";
  c.sliding_window = read_gguf_sliding_window(metadata, 0);
  const std::vector<int64_t> pattern = metadata.get_int_array("attention.sliding_window_pattern");
  if (pattern.empty()) {
    c.layer_types = sliding_layer_pattern(c.num_hidden_layers, 4);  // the converter's default
    return;
  }
  if (static_cast<int64_t>(pattern.size()) != c.num_hidden_layers) {
    metadata.fail("metadata 'olmo2.attention.sliding_window_pattern' has " + std::to_string(pattern.size()) +
                  " entries for " + std::to_string(c.num_hidden_layers) + " layers");
  }
  c.layer_types.clear();
  for (const int64_t slides : pattern) c.layer_types.push_back(slides != 0 ? AttentionKind::sliding : AttentionKind::full);
}

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
