// The shape of a Llama-family decoder (Llama, SmolLM2, Mistral, Qwen2/2.5, Qwen3), as Hugging Face's
// config.json describes it (read and written by src/io/hf_config.h). Torch-free, so the planner and
// the CLI can use it cheaply. The families differ only in the switches below: biases (Qwen2), q/k
// norms (Qwen3), a sliding attention window (Mistral).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

enum class RopeScalingType { none, linear, llama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;
  // llama3 only:
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  // < num_attention_heads: grouped-query attention
  int64_t head_dim = 128;            // usually hidden_size / num_attention_heads
  int64_t max_position_embeddings = 4096;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (Qwen2-style has q/k/v only; see attention_output_bias)
  bool attention_output_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;          // Qwen3: an RMSNorm over head_dim on every query and key head, before RoPE
  int64_t sliding_window = 0;    // Mistral: a query attends the last `sliding_window` keys (itself included); 0: all
  int64_t bos_token_id = 1;
  std::vector<int64_t> eos_token_ids{2};
  int64_t pad_token_id = -1;  // -1: none
  std::string torch_dtype = "float32";
  std::string model_type = "llama";

  // Parameter count of the backbone + LM head (tied embeddings counted once).
  int64_t num_parameters() const {
    const int64_t attn = hidden_size * head_dim * (num_attention_heads + 2 * num_key_value_heads) +
                         num_attention_heads * head_dim * hidden_size;
    const int64_t mlp = 3 * hidden_size * intermediate_size;
    const int64_t per_layer = attn + mlp + 2 * hidden_size + (qk_norm ? 2 * head_dim : 0);
    const int64_t embed = vocab_size * hidden_size;
    return embed * (tie_word_embeddings ? 1 : 2) + per_layer * num_hidden_layers + hidden_size;
  }
};

}  // namespace ferry
