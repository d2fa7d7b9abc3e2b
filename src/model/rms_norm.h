// RMSNorm as a module: Hugging Face LlamaRMSNorm semantics (statistics in fp32, the normalised
// value cast back to the input dtype, then scaled by the weight). The parameter is `weight`.
#pragma once

#include <torch/torch.h>

namespace ferry {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t hidden_size, double eps);

  // x: (..., C) -> (..., C). With autograd on, the plain libtorch formula (differentiable); with
  // autograd off, kernels::rms_norm (the CUDA kernel for CUDA tensors).
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // (C)
  double eps;
};
TORCH_MODULE(RMSNorm);

}  // namespace ferry
