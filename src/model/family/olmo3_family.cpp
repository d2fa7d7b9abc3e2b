// OLMo 3: transformers' Olmo3Config. OLMo 2's block (post-norms, whole-projection q/k norms) with
// sliding-window layers: three sliding, then one full (`layer_types`). llama.cpp: "olmo3" is read
// as OLMo 2 with that pattern.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/gguf_metadata.h"
#include "src/model/family/olmo_block.h"

namespace ferry {
namespace {

std::vector<AttentionKind> olmo3_pattern(int64_t num_layers) {
  std::vector<AttentionKind> out;
  for (int64_t i = 0; i < num_layers; ++i) out.push_back((i + 1) % 4 != 0 ? AttentionKind::sliding : AttentionKind::full);
  return out;
}

void read_config(const ConfigKeys& keys, ModelShape& c) {
  set_olmo_block(keys, c);
  if (!keys.contains("sliding_window")) {
    c.sliding_window = 4096;
  } else {
    c.sliding_window = keys.has("sliding_window") ? keys.positive_int("sliding_window") : 0;
  }
  c.layer_types = keys.has("layer_types") ? read_layer_types(keys, c.num_hidden_layers) : olmo3_pattern(c.num_hidden_layers);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_olmo_block(c, "olmo3");
  out["attention_bias"] = c.attention_bias;
  out["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json(nullptr);
  out["layer_types"] = layer_type_names(c);
  if (c.sliding_rope_theta > 0) {
    out["rope_parameters"] = {{"full_attention", out["rope_parameters"]},
                              {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", c.sliding_rope_theta}}}};
  }
}

void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  set_olmo_switches(c);
  c.sliding_window = metadata.get_int("attention.sliding_window", 4096);
  c.layer_types = olmo3_pattern(c.num_hidden_layers);
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  std::vector<AttentionKind> expected;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    expected.push_back((i + 1) % 4 != 0 ? AttentionKind::sliding : AttentionKind::full);
  }
  if (c.layer_types != expected || (c.sliding_rope_theta != 0 && c.sliding_rope_theta != c.rope_theta)) {
    throw UserError("GGUF export: llama.cpp's olmo3 runs every 4th layer with full attention and one RoPE base; this "
                    "model differs, so llama.cpp would not run it as transformers does (export it with --format hf)");
  }
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
