// OLMo 3: transformers' Olmo3Config. OLMo 2's block (post-norms, whole-projection q/k norms) with
// sliding-window layers: three sliding, then one full (`layer_types`). llama.cpp has no "olmo3": its
// converter writes OLMo 3 as "olmo2" with the window and the per-layer pattern, and so does Ferry
// (olmo2_family.cpp reads such a file back as OLMo 3).
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

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(c.sliding_rope_theta == 0 || c.sliding_rope_theta == c.rope_theta, "olmo2",
                    "OLMo 3 with one RoPE base for all layers");
  GgufKey pattern{.key = "attention.sliding_window_pattern", .type = GgufKey::Type::bool_array};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) pattern.flags.push_back(c.layer_slides(i));
  return {{"attention.sliding_window", GgufKey::Type::u32, static_cast<double>(c.sliding_window)}, pattern};
}

}  // namespace

const ModelFamily& olmo3_family() {
  static const ModelFamily family{
      .name = "olmo3",
      .model_types = {"olmo3"},
      .causal_lm_class = "Olmo3ForCausalLM",
      .score_class = "Olmo3ForSequenceClassification",
      .gguf_architecture = "olmo2",  // found as olmo2_family() first, whose reader tells them apart
      .gguf_permutes_qk = false,
      .defaults = olmo3_defaults(),
      .read_config = read_config,
      .write_config = write_config,
      .write_gguf = write_gguf,
  };
  return family;
}

}  // namespace ferry
