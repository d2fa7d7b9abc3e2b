// OLMo 3: transformers' Olmo3Config. OLMo 2's block (post-norms, whole-projection q/k norms) with
// sliding-window layers: three sliding, then one full (`layer_types`). llama.cpp: "olmo3" is read
// as OLMo 2 with that pattern.
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/olmo_block.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) {
  set_olmo_block(keys, c);
  c.sliding_window = read_sliding_window(keys, 4096);
  c.layer_types = keys.has("layer_types") ? read_layer_types(keys, c.num_hidden_layers)
                                          : sliding_layer_pattern(c.num_hidden_layers, 4);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_olmo_block(c, "olmo3");
  out["attention_bias"] = c.attention_bias;
  out["sliding_window"] = sliding_window_json(c);
  out["layer_types"] = layer_type_names(c);
  if (c.sliding_rope_theta > 0) write_rope_per_layer_type(c, out);
}

void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  set_olmo_switches(c);
  c.sliding_window = read_gguf_sliding_window(metadata, 4096);
  c.layer_types = sliding_layer_pattern(c.num_hidden_layers, 4);
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(c.layer_types == sliding_layer_pattern(c.num_hidden_layers, 4) &&
                        (c.sliding_rope_theta == 0 || c.sliding_rope_theta == c.rope_theta),
                    "olmo3", "every 4th layer with full attention and one RoPE base");
  return {{"attention.sliding_window", GgufKey::Type::u32, static_cast<double>(c.sliding_window)}};
}

}  // namespace

const ModelFamily& olmo3_family() {
  static const ModelFamily family{
      .name = "olmo3",
      .model_types = {"olmo3"},
      .causal_lm_class = "Olmo3ForCausalLM",
      .score_class = "Olmo3ForSequenceClassification",
      .gguf_architecture = "olmo3",
      .gguf_permutes_qk = false,
      .defaults = olmo3_defaults(),
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
  };
  return family;
}

}  // namespace ferry
