// Gemma 3 (text): transformers' Gemma3TextConfig / Gemma3ForCausalLM (model_type gemma3_text: the
// 270M and 1B models). Sandwich norms (four per block) with (1 + w) RMSNorm weights in fp32, q/k
// norms per head, GeGLU with tanh GELU, embeddings times sqrt(hidden_size), scores scaled by
// query_pre_attn_scalar^-1/2, sliding-window layers among full ones (`layer_types`, 5:1 by
// default) with a RoPE base of their own (`rope_local_base_freq`, 10000), RoPE scaling on the full
// layers only, tied embeddings over a 262k vocabulary. llama.cpp: "gemma3".
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
  c.qk_norm = QkNorm::per_head;
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
  c.query_pre_attn_scalar = keys.positive_number("query_pre_attn_scalar", 256.0);
  c.attn_logit_softcapping = keys.optional_positive_number("attn_logit_softcapping");
  c.final_logit_softcapping = keys.optional_positive_number("final_logit_softcapping");
  if (keys.boolean("use_bidirectional_attention", false)) {
    keys.fail("use_bidirectional_attention", "is true (an embedding model's encoder); Ferry trains causal models");
  }
  read_gemma_layer_types(keys, c, 6);
  // transformers 5 writes the local base inside rope_parameters.sliding_attention (read with the
  // shared keys); older files as rope_local_base_freq.
  if (c.sliding_rope_theta == 0) c.sliding_rope_theta = keys.positive_number("rope_local_base_freq", 10000.0);
}

void write_config(const ModelShape& c, nlohmann::json& out) {
  require_gemma_block(c, "gemma3_text");
  require_expressible(c.qk_norm == QkNorm::per_head, "gemma3_text", "no per-head q/k norms");
  require_expressible(c.attention_bias == c.attention_output_bias, "gemma3_text", "q/k/v biases but no o_proj bias");
  out["attention_bias"] = c.attention_bias;
  write_gemma_keys(c, out);
  write_rope_per_layer_type(c, out);
  out["rope_local_base_freq"] = out["rope_parameters"]["sliding_attention"]["rope_theta"];  // for older readers
  out["use_bidirectional_attention"] = false;
}

void read_gguf(const GgufMetadata& metadata, ModelShape& c) {
  set_gemma_block(c);
  c.qk_norm = QkNorm::per_head;
  // llama.cpp runs Gemma 3 with the local base 10000 and every 6th layer global (its own constants,
  // not in the file), and scales the scores by head_dim^-1/2, as transformers' GGUF loader does.
  c.query_pre_attn_scalar = static_cast<double>(c.head_dim);
  c.sliding_window = read_gguf_sliding_window(metadata, 4096);
  c.layer_types = sliding_layer_pattern(c.num_hidden_layers, 6);
  c.sliding_rope_theta = 10000.0;
  c.final_logit_softcapping = metadata.get_float("final_logit_softcapping", 0.0);
  c.attn_logit_softcapping = metadata.get_float("attn_logit_softcapping", 0.0);
}

std::vector<GgufKey> write_gguf(const ModelShape& c) {
  require_llama_cpp(c.layer_types == sliding_layer_pattern(c.num_hidden_layers, 6), "gemma3",
                    "every 6th layer with full attention");
  require_llama_cpp(c.sliding_rope_theta == 10000.0, "gemma3", "sliding layers with the RoPE base 10000");
  require_llama_cpp(c.query_pre_attn_scalar == static_cast<double>(c.head_dim), "gemma3",
                    "attention scaled by head_dim^-1/2");
  require_llama_cpp(c.attn_logit_softcapping == 0 && c.final_logit_softcapping == 0, "gemma3", "without soft-capping");
  return {{"attention.sliding_window", GgufKey::Type::u32, static_cast<double>(c.sliding_window)}};
}

}  // namespace

const ModelFamily& gemma3_family() {
  static const ModelFamily family{
      .name = "gemma3",
      .model_types = {"gemma3_text"},
      .causal_lm_class = "Gemma3ForCausalLM",
      .score_class = "Gemma3TextForSequenceClassification",
      .gguf_architecture = "gemma3",
      .gguf_permutes_qk = false,
      .defaults = {.num_key_value_heads = 4,
                   .head_dim = 256,
                   .max_position_embeddings = 131072,
                   .rms_norm_eps = 1e-6,
                   .rope_theta = 1000000.0,
                   .tie_word_embeddings = true,
                   .bos_token_id = 2,
                   .eos_token_ids = {1},
                   .pad_token_id = 0,
                   .activation_key = "hidden_activation",
                   .activation = "gelu_pytorch_tanh",
                   .rope_per_layer_type = true},
      .read_config = read_config,
      .write_config = write_config,
      .read_gguf = read_gguf,
      .write_gguf = write_gguf,
  };
  return family;
}

}  // namespace ferry
