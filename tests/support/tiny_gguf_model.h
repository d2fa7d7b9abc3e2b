// A tiny random Llama written as a GGUF file, for tests of LoRA on a GGUF base (lora.quantize_base
// gguf): the decoder projections in chosen ggml types, each as random but valid blocks (every byte
// random, the fp16 scale / min fields overwritten by small finite halves, as
// tests/parity/io_ggml_dequantize_ref.py makes them; the K-quants cannot be quantised by gguf-py,
// so they are tested this way too), embeddings, norms and head in F32, and the demo tokenizer's
// vocabulary (data/tokenizer.model) as its tokenizer.* keys. Rows of 256 values fit every type.
#pragma once

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/config/model_shape.h"
#include "src/io/ggml_types.h"
#include "src/io/gguf_tokenizer.h"
#include "src/io/gguf_writer.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry::gguf_test {

// vocabulary 2000 (the demo tokenizer's), hidden 256, intermediate 512, 2 layers, 4 heads, 2 kv heads.
inline ModelShape tiny_gguf_shape() {
  return test_support::tiny_llama_config(
      {.vocab_size = 2000, .hidden_size = 256, .intermediate_size = 512, .head_dim = 64});
}

// Byte offsets of the fp16 d / dmin (or m) fields inside one block of each quantised type.
inline std::vector<int> half_fields(io::GgmlType type) {
  using T = io::GgmlType;
  switch (type) {
    case T::q4_0: case T::q5_0: case T::q8_0: return {0};
    case T::q4_1: case T::q5_1: case T::q4_k: case T::q5_k: return {0, 2};
    case T::q2_k: return {80, 82};
    case T::q3_k: return {108};
    case T::q6_k: return {208};
    default: return {};
  }
}

// The largest |sub-block scale x quant| of each type, so that scales of `scale` / this give
// weights of at most about `scale`.
inline double largest_code(io::GgmlType type) {
  using T = io::GgmlType;
  switch (type) {
    case T::q4_0: return 8;
    case T::q4_1: case T::q5_0: return 16;
    case T::q5_1: return 32;
    case T::q8_0: return 128;
    case T::q2_k: return 45;     // 4-bit scale x 2-bit q
    case T::q3_k: return 128;    // 6-bit signed scale x 3-bit signed q
    case T::q4_k: return 945;    // 6-bit scale x 4-bit q
    case T::q5_k: return 1953;   // 6-bit scale x 5-bit q
    case T::q6_k: return 4096;   // int8 scale x 6-bit signed q
    default: return 1;
  }
}

// The bytes of a (rows, cols) weight in `type`: random blocks whose scales are halves giving
// weights of at most about `scale`, or for F32 / F16 / BF16 random normal values of std `scale` / 2.
inline at::Tensor random_ggml_weight(io::GgmlType type, int64_t rows, int64_t cols, double scale, std::mt19937& rng) {
  const io::GgmlTypeTraits& traits = io::ggml_type_traits(type);
  if (traits.block_elements == 1) {
    at::Tensor w = at::randn({rows, cols}) * (scale / 2);
    return type == io::GgmlType::f32 ? w : w.to(type == io::GgmlType::f16 ? at::kHalf : at::kBFloat16);
  }
  const int64_t blocks = rows * cols / traits.block_elements;
  at::Tensor bytes = at::empty({blocks * traits.block_bytes}, at::kByte);
  uint8_t* p = bytes.data_ptr<uint8_t>();
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> half_value(0.2f, 1.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* block = p + b * traits.block_bytes;
    for (int64_t i = 0; i < traits.block_bytes; ++i) block[i] = static_cast<uint8_t>(byte(rng));
    for (int offset : half_fields(type)) {
      const float sign = offset == 0 || byte(rng) < 128 ? 1.0f : -1.0f;  // d > 0; a min either sign
      const at::Half h(static_cast<float>(sign * half_value(rng) * scale / largest_code(type)));
      std::memcpy(block + offset, &h, 2);
    }
  }
  return bytes;
}

// Writes the model to `file`: projection p (q, k, v, o, gate, up, down) of layer l in
// types[(7 * l + p) % types.size()]. Returns the file.
inline std::filesystem::path write_tiny_gguf(const std::filesystem::path& file, const std::vector<io::GgmlType>& types,
                                             uint32_t seed = 1, const ModelShape& c = tiny_gguf_shape()) {
  std::mt19937 rng(seed);
  at::manual_seed(seed);
  io::GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_string("general.name", "tiny");
  writer.add_uint32("llama.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  writer.add_uint32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  writer.add_uint32("llama.block_count", static_cast<uint32_t>(c.num_hidden_layers));
  writer.add_uint32("llama.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  writer.add_uint32("llama.attention.head_count", static_cast<uint32_t>(c.num_attention_heads));
  writer.add_uint32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_key_value_heads));
  writer.add_float32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  writer.add_float32("llama.rope.freq_base", 10000.0f);
  writer.add_uint32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));
  const std::filesystem::path tokenizer_dir = file.parent_path() / (file.stem().string() + "-tokenizer");
  std::filesystem::create_directories(tokenizer_dir);
  std::filesystem::copy_file(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model", tokenizer_dir / "tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  io::add_gguf_vocab(writer, io::read_gguf_vocab(tokenizer_dir, c.vocab_size));
  std::filesystem::remove_all(tokenizer_dir);

  const auto add = [&](const std::string& name, std::vector<int64_t> shape, io::GgmlType type, double scale) {
    const at::Tensor value = shape.size() == 1 ? at::ones(shape) + at::randn(shape) * 0.1
                                               : random_ggml_weight(type, shape[0], shape[1], scale, rng);
    writer.add_tensor(name, shape, type, [value] { return value; });
  };
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  add("token_embd.weight", {c.vocab_size, h}, io::GgmlType::f32, 0.5);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const auto type = [&](int64_t p) { return types[static_cast<size_t>(7 * l + p) % types.size()]; };
    add(b + "attn_norm.weight", {h}, io::GgmlType::f32, 0);
    add(b + "attn_q.weight", {q, h}, type(0), 0.06);
    add(b + "attn_k.weight", {kv, h}, type(1), 0.06);
    add(b + "attn_v.weight", {kv, h}, type(2), 0.06);
    add(b + "attn_output.weight", {h, q}, type(3), 0.06);
    add(b + "ffn_norm.weight", {h}, io::GgmlType::f32, 0);
    add(b + "ffn_gate.weight", {c.intermediate_size, h}, type(4), 0.06);
    add(b + "ffn_up.weight", {c.intermediate_size, h}, type(5), 0.06);
    add(b + "ffn_down.weight", {h, c.intermediate_size}, type(6), 0.06);
  }
  add("output_norm.weight", {h}, io::GgmlType::f32, 0);
  add("output.weight", {c.vocab_size, h}, io::GgmlType::f32, 0.05);
  std::filesystem::create_directories(file.parent_path());
  writer.write(file);
  return file;
}

}  // namespace ferry::gguf_test
