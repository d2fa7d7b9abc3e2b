// Gemma 2: transformers' Gemma2Config / Gemma2ForCausalLM. Gemma's block (sandwich norms with
// (1 + w) weights in fp32, GeGLU, sqrt(hidden_size) embedding scale, query_pre_attn_scalar) with
// tanh soft-capping of the attention scores (50) and of the final logits (30), no q/k norms, and
// sliding-window layers alternating with full ones (layer 0 slides). llama.cpp: "gemma2".
#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/families.h"
#include "src/model/family/family_switches.h"
#include "src/model/family/gemma_block.h"
#include "src/model/family/gguf_metadata.h"

namespace ferry {
namespace {

void read_config(const ConfigKeys& keys, ModelShape& c) {
  set_gemma_block(c);
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
  c.query_pre_attn_scalar = keys.positive_number("query_pre_attn_scalar", 256.0);
  // Absent: Gemma2Config's 50 and 30; null: off.
  c.attn_logit_softcapping = keys.contains("attn_logit_softcapping") ? keys.optional_positive_number("attn_logit_softcapping") : 50.0;
  c.final_logit_softcapping =
      keys.contains("final_logit_softcapping") ? keys.optional_positive_number("final_logit_softcapping") : 30.0;
  read_gemma_layer_types(keys, c, 2);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_gemma_block(c, "gemma2");
  require_expressible(c.qk_norm == QkNorm::none, "gemma2", "q/k norms (Gemma 3 has them: model_type gemma3_text)");
  require_expressible(c.sliding_rope_theta == 0 || c.sliding_rope_theta == c.rope_theta, "gemma2",
                      "a RoPE base of its own on sliding layers (Gemma 3)");
  require_expressible(c.attention_bias == c.attention_output_bias, "gemma2", "q/k/v biases but no o_proj bias");
  out["attention_bias"] = c.attention_bias;
  write_gemma_keys(c, out);
}

void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  set_gemma_block(c);
  c.query_pre_attn_scalar = static_cast<double>(c.head_dim);
  c.sliding_window = read_gguf_sliding_window(metadata, 4096);
  c.layer_types = sliding_layer_pattern(c.num_hidden_layers, 2);
  c.attn_logit_softcapping = metadata.get_float("attn_logit_softcapping", 50.0);
  c.final_logit_softcapping = metadata.get_float("final_logit_softcapping", 30.0);
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(c.layer_types == sliding_layer_pattern(c.num_hidden_layers, 2), "gemma2",
                    "sliding and full layers alternating");
  require_llama_cpp(c.query_pre_attn_scalar == static_cast<double>(c.head_dim), "gemma2",
                    "attention scaled by head_dim^-1/2");
  return {{"attention.sliding_window", GgufKey::Type::u32, static_cast<double>(c.sliding_window)},
          {"attn_logit_softcapping", GgufKey::Type::f32, c.attn_logit_softcapping},
          {"final_logit_softcapping", GgufKey::Type::f32, c.final_logit_softcapping}};
}

}  // namespace

const ModelFamily& gemma2_family() {
  static const ModelFamily family{
      .name = "gemma2",
      .model_types = {"gemma2"},
      .causal_lm_class = "Gemma2ForCausalLM",
      .score_class = "Gemma2ForSequenceClassification",
      .gguf_architecture = "gemma2",
      .gguf_permutes_qk = false,
      .defaults = {.num_key_value_heads = 4,
                   .head_dim = 256,
                   .max_position_embeddings = 8192,
                   .rms_norm_eps = 1e-6,
                   .rope_theta = 10000.0,
                   .tie_word_embeddings = true,
                   .bos_token_id = 2,
                   .eos_token_ids = {1},
                   .pad_token_id = 0,
                   .activation_key = "hidden_activation",
                   .activation = "gelu_pytorch_tanh",
                   .rope_per_layer_type = false},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
  };
  return family;
}

}  // namespace ferry
