// The tiny Llama shapes that tests build random models from. The usual one: 2 layers, hidden 64,
// 4 query heads over 2 KV heads of 16, 128 positions; each test picks the vocabulary (101 for model
// tests, 2000 = data/tokenizer.model's for stage tests) and the MLP width. A test that needs another
// shape (a narrower model, a third layer, no grouped-query attention) names only what differs:
// tiny_llama_config({.vocab_size = 100, .num_key_value_heads = 4}).
#pragma once

#include <cstdint>

#include "core/config/model_shape.h"

namespace ferry::test_support {

struct TinyShape {
  int64_t vocab_size = 101;
  int64_t hidden_size = 64;
  int64_t intermediate_size = 128;
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  int64_t head_dim = 16;
  int64_t max_position_embeddings = 128;
  double rms_norm_eps = 1e-5;
};

inline ModelShape tiny_llama_config(const TinyShape& shape) {
  ModelShape c;
  c.vocab_size = shape.vocab_size;
  c.hidden_size = shape.hidden_size;
  c.intermediate_size = shape.intermediate_size;
  c.num_hidden_layers = shape.num_hidden_layers;
  c.num_attention_heads = shape.num_attention_heads;
  c.num_key_value_heads = shape.num_key_value_heads;
  c.head_dim = shape.head_dim;
  c.max_position_embeddings = shape.max_position_embeddings;
  c.rms_norm_eps = shape.rms_norm_eps;
  return c;
}

inline ModelShape tiny_llama_config(int64_t vocab_size, int64_t intermediate_size = 128) {
  return tiny_llama_config(TinyShape{.vocab_size = vocab_size, .intermediate_size = intermediate_size});
}

}  // namespace ferry::test_support
