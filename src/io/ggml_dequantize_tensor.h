// A ggml tensor's data (GGUF blocks) dequantised into a torch tensor: dequantize_row
// (ggml_dequantize.h) over the rows on at::parallel_for's threads, converted to float32, bfloat16
// or float16 (round to nearest-even, bit for bit as torch's `.to()` on the CPU, NaNs included).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "src/io/ggml_types.h"

namespace ferry::io {

// `data` holds ggml_nbytes(type, numel) bytes; `shape` is in torch order (last dimension innermost,
// = ggml's ne[0]), and that last dimension, a row, must be a whole number of `type`'s blocks
// (FERRY_CHECK naming the type and the row length otherwise: readers report the InputError).
// Returns a new contiguous CPU tensor of `dtype` (kFloat, kBFloat16 or kHalf).
at::Tensor dequantize_tensor(GgmlType type, const uint8_t* data, at::IntArrayRef shape, at::ScalarType dtype);

}  // namespace ferry::io
