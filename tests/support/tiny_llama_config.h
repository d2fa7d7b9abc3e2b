// The tiny Llama shape that unit tests build random models from: 2 layers, hidden 64, 4 query heads
// over 2 KV heads of 16, 128 positions. Each test picks the vocabulary (101 for model tests, 2000 =
// data/tokenizer.model's for stage tests) and the MLP width.
#pragma once

#include <cstdint>

#include "src/model/llama_config.h"

namespace ferry::test_support {

inline LlamaConfig tiny_llama_config(int64_t vocab_size, int64_t intermediate_size = 128) {
  LlamaConfig c;
  c.vocab_size = vocab_size;
  c.hidden_size = 64;
  c.intermediate_size = intermediate_size;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  return c;
}

}  // namespace ferry::test_support
