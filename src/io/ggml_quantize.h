// Tensor data in the ggml types a GGUF file holds: f32, f16 and bf16 (from float32 with
// round-to-nearest-even, as torch and numpy convert) and Q8_0 (blocks of 32 values: an fp16 scale
// d = max|x| / 127 and 32 int8 round(x / d), rounding halves away from zero), bit for bit what
// ggml's quantize_row_q8_0_ref and gguf-py's gguf.quants.quantize(..., Q8_0) give.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "src/io/gguf_writer.h"

namespace ferry::io {

// Q8_0 of `n` floats (`n` a multiple of 32) into n / 32 blocks of 34 bytes at `out`.
void quantize_q8_0(const float* x, int64_t n, uint8_t* out);

// `tensor` (CPU, floating point, any shape) as a contiguous CPU tensor holding its bytes in
// `type`: values go through float32 first (exact for f16/bf16 sources). Q8_0 comes back as uint8 and
// needs the last dimension to be a multiple of 32 (each row is quantized on its own).
at::Tensor to_ggml(const at::Tensor& tensor, GgmlType type);

}  // namespace ferry::io
