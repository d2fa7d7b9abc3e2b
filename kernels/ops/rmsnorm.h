// RMSNorm on tensors: the CUDA kernel for CUDA tensors when compiled in, else the reference
// formula. Forward only (inference and generation); training uses the autograd reference.
#pragma once

#include <ATen/core/Tensor.h>

namespace ferry::kernels {

// x: (..., C), w: (C). Hugging Face LlamaRMSNorm semantics, any of fp32/bf16/fp16.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);

// The plain libtorch formula every fast path is tested against.
at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& w, double eps);

// True when rms_norm would run the CUDA kernel for this tensor.
bool rms_norm_uses_cuda_kernel(const at::Tensor& x);

}  // namespace ferry::kernels
