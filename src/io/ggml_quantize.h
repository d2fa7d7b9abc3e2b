// Tensor data in the ggml types a GGUF file holds, from torch tensors: f32, f16 and bf16 (from
// float32 with round-to-nearest-even, as torch and numpy convert) and the block types Q4_0, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K and Q6_K, bit for bit what llama.cpp's reference quantisers give
// (kernels/cpu/ggml_quantize.h: the functions llama-quantize runs without an importance matrix;
// Q8_0 is also what gguf-py's gguf.quants.quantize(..., Q8_0) gives).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "src/io/gguf_writer.h"

namespace ferry::io {

// Q8_0 of `n` floats (`n` a multiple of 32) into n / 32 blocks of 34 bytes at `out`.
void quantize_q8_0(const float* x, int64_t n, uint8_t* out);

// True for the types to_ggml writes.
bool ggml_type_writable(GgmlType type);

// `tensor` (CPU, floating point, any shape) as a contiguous CPU tensor holding its bytes in
// `type`: values go through float32 first (exact for f16/bf16 sources). Block types come back as
// uint8 and need the last dimension to be a multiple of the type's block (each row is quantised on
// its own); they are quantised on kernels::default_thread_pool()'s threads.
at::Tensor to_ggml(const at::Tensor& tensor, GgmlType type);

}  // namespace ferry::io
