// A 2-D weight kept in a ggml type as a GGUF file stores it (lora.quantize_base gguf): its packed
// blocks, one row of blocks per output row, and the type and shape that describe them. The frozen
// base of LoRA on a GGUF model (src/model/ggml_linear.h) holds one per projection and dequantises it
// for every matmul; checkpoints store it as ggml_checkpoint.h says.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/io/ggml_types.h"

namespace ferry::io {

struct GgmlTensor {
  at::Tensor blocks;            // uint8 (rows, bytes per row): ggml_nbytes(type, cols) bytes a row
  GgmlType type = GgmlType::f32;
  std::vector<int64_t> shape;   // of the full-precision tensor: (rows, cols) = (out, in)

  int64_t numel() const;
  int64_t bytes() const;  // as stored: Q4_1 0.625 bytes per weight, Q8_0 1.0625, Q4_K 0.5625
};

// `blocks` (uint8, 2-D) as a GgmlTensor of `type`: the columns follow from the bytes of a row.
// InputError naming `what` when the bytes are not a whole number of `type`'s blocks a row.
GgmlTensor ggml_tensor_from_blocks(const at::Tensor& blocks, GgmlType type, const std::string& what);

// The full-precision tensor (q.shape) in `dtype` (fp32, bf16 or fp16), bit for bit as
// dequantize_tensor (ggml_dequantize_tensor.h), on the device of q.blocks. A fresh tensor per call.
// CUDA blocks are dequantised on the host (no ggml CUDA kernel yet) and the result copied back.
at::Tensor ggml_dequantize(const GgmlTensor& q, at::ScalarType dtype);

// q's blocks moved to `device` (a copy of the struct; the same tensor when already there).
GgmlTensor ggml_to_device(const GgmlTensor& q, c10::Device device);

}  // namespace ferry::io
