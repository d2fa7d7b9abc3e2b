// SmolLM3: transformers' SmolLM3Config. A Llama block where some layers use no position embedding
// at all (NoPE): `no_rope_layers` (1: RoPE, 0: NoPE, one per layer) or, without it, every
// `no_rope_layer_interval`-th layer (4). llama.cpp: "smollm3" (every 4th layer NoPE).
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"

namespace ferry {
namespace {

std::vector<bool> every_nth_without_rope(int64_t num_layers, int64_t interval) {
  std::vector<bool> out;
  for (int64_t i = 0; i < num_layers; ++i) out.push_back((i + 1) % interval != 0);
  return out;
}

void read_config(const ConfigKeys& keys, ModelShape& c) {
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
  c.mlp_bias = keys.boolean("mlp_bias", false);
  if (keys.boolean("use_sliding_window", false)) {
    keys.fail("use_sliding_window", "is true; Ferry runs SmolLM3 with full attention (set it to false)");
  }
  if (keys.has("no_rope_layers")) {
    const nlohmann::json& layers = keys.object().at("no_rope_layers");
    if (!layers.is_array() || static_cast<int64_t>(layers.size()) != c.num_hidden_layers) {
      keys.fail("no_rope_layers", "must be a list of 0 / 1, one per layer (" + std::to_string(c.num_hidden_layers) +
                                      "), got " + layers.dump());
    }
    for (const nlohmann::json& uses_rope : layers) {
      if (uses_rope != 0 && uses_rope != 1) keys.fail("no_rope_layers", "holds " + uses_rope.dump() + "; 1 is RoPE, 0 NoPE");
      c.rope_layers.push_back(uses_rope == 1);
    }
  } else {
    c.rope_layers = every_nth_without_rope(c.num_hidden_layers, keys.positive_int("no_rope_layer_interval", 4));
  }
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  ModelShape without_nope = c;
  without_nope.rope_layers.clear();
  require_llama_block(without_nope, "smollm3");
  require_expressible(c.qk_norm == QkNorm::none, "smollm3", "q/k norms");
  require_expressible(c.sliding_window == 0, "smollm3", "a sliding window");
  require_expressible(c.attention_bias == c.attention_output_bias, "smollm3", "q/k/v biases but no o_proj bias");
  out["attention_bias"] = c.attention_bias;
  out["mlp_bias"] = c.mlp_bias;
  out["use_sliding_window"] = false;
  out["sliding_window"] = nullptr;
  std::vector<int> layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers.push_back(c.layer_rotates(i) ? 1 : 0);
  out["no_rope_layers"] = layers;
}

void read_gguf(const GgufMetadata&, ModelShape& c) { c.rope_layers = every_nth_without_rope(c.num_hidden_layers, 4); }

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(c.rope_layers == every_nth_without_rope(c.num_hidden_layers, 4), "smollm3",
                    "every 4th layer without RoPE");
  return {};
}

}  // namespace

const ModelFamily& smollm3_family() {
  static const ModelFamily family{
      .name = "smollm3",
      .model_types = {"smollm3"},
      .causal_lm_class = "SmolLM3ForCausalLM",
      .score_class = "SmolLM3ForSequenceClassification",
      .gguf_architecture = "smollm3",
      .gguf_permutes_qk = true,  // llama.cpp's converter writes SmolLM3 as a Llama (SmolLM3Model(LlamaModel))
      .defaults = {.num_key_value_heads = 4,
                   .max_position_embeddings = 32768,
                   .rms_norm_eps = 1e-6,
                   .rope_theta = 2000000.0,
                   .tie_word_embeddings = true,
                   .bos_token_id = 128000,
                   .eos_token_ids = {128001},
                   .pad_token_id = 128004,
                   .has_head_dim_key = false},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
  };
  return family;
}

}  // namespace ferry
