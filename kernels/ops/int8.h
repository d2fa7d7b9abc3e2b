// Row-wise int8 on tensors (lora.quantize_base int8's frozen base): quantise a weight as
// bitsandbytes' int8_vectorwise_quant does and dequantise it into a compute dtype, on the device
// the tensors live on (CPU or CUDA: the same ATen elementwise ops on either, no hand-written
// kernel). The arithmetic and its scalar definition are kernels/cpu/int8_rowwise.h's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ferry::kernels {

struct Int8Tensor {
  at::Tensor cb;   // int8 (out, in): the codes
  at::Tensor scb;  // fp32 (out): each row's absmax
  at::ScalarType dtype = at::kFloat;  // of the tensor that was quantised

  std::vector<int64_t> shape() const { return cb.sizes().vec(); }
  int64_t numel() const { return cb.numel(); }
  int64_t bytes() const { return cb.numel() + scb.numel() * 4; }  // ~1 byte per weight
};

// Quantises a 2-D `w` (fp32, bf16 or fp16; any device); the result lives on w's device.
Int8Tensor int8_quantize_tensor(const at::Tensor& w);

// (out, in) in `dtype` (fp32, bf16 or fp16) on the tensors' device; a fresh tensor per call.
at::Tensor int8_dequantize_tensor(const Int8Tensor& q, at::ScalarType dtype);

// q's tensors on `device` (the same tensors when already there).
Int8Tensor int8_to_device(const Int8Tensor& q, c10::Device device);

}  // namespace ferry::kernels
