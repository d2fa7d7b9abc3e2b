// NF4 on tensors (QLoRA's frozen base): quantise a weight into bitsandbytes' 4-bit NormalFloat
// format, optionally double-quantising the block scales, and dequantise it back into a compute
// dtype, on the CPU (kernels/cpu/nf4.h) or on CUDA (kernels/cuda/nf4_dequant.h) where the packed
// tensors live. Bit for bit what bitsandbytes 0.50.2 computes (quantize_4bit / dequantize_4bit).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ferry::kernels {

// One quantised tensor; the layout of each part is kernels/cpu/nf4.h's.
struct Nf4Tensor {
  at::Tensor packed;         // uint8 (ceil(n / 2)): two 4-bit codes per byte
  at::Tensor absmax;         // fp32 (blocks); uint8 (blocks) when double-quantised
  at::Tensor nested_absmax;  // fp32 (ceil(blocks / 256)) when double-quantised, else undefined
  float nested_offset = 0.0f;
  std::vector<int64_t> shape;            // of the full-precision tensor, e.g. (out, in)
  int64_t blocksize = 64;
  at::ScalarType dtype = at::kFloat;     // of the tensor that was quantised (bnb's quant_state dtype)

  bool nested() const { return nested_absmax.defined(); }
  int64_t numel() const;
  // Bytes of packed + absmax (+ nested_absmax): ~0.516 per weight nested, ~0.5625 plain.
  int64_t bytes() const;
};

// Quantises `x` (fp32, bf16 or fp16, any shape; a CUDA tensor is copied to the host first) with
// bnb's blocksize (64 by default); `double_quant` as bnb's compress_statistics. The offset of the
// double quantisation is libtorch's `absmax.mean()`, as in bnb, so it equals what bnb computes in a
// process with the same CPU capability and thread count. The result lives on the CPU.
Nf4Tensor nf4_quantize_tensor(const at::Tensor& x, bool double_quant, int64_t blocksize = 64);

// The fp32 block scales (unnested when double-quantised), on the tensors' device.
at::Tensor nf4_block_absmax(const Nf4Tensor& q);

// The full-precision tensor (q.shape) in `dtype` (fp32, bf16 or fp16), on the device of q.packed:
// code * absmax in fp32, rounded once to `dtype`. A fresh tensor per call.
at::Tensor nf4_dequantize_tensor(const Nf4Tensor& q, at::ScalarType dtype);

// q's tensors moved to `device` (a copy of the struct; the same tensors when already there).
Nf4Tensor nf4_to_device(const Nf4Tensor& q, c10::Device device);

}  // namespace ferry::kernels
