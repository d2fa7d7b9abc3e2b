// RMSNorm as a module, in the two ways families apply the weight (core/config/model_shape.h's
// NormWeight): `plain`, Hugging Face LlamaRMSNorm semantics (statistics in fp32, the normalised
// value cast back to the input dtype, then scaled by the weight, initialised to 1); `one_plus`,
// Gemma's (normalised and scaled by 1 + weight all in fp32, then cast; the weight starts at 0).
// The parameter is `weight`.
#pragma once

#include <torch/torch.h>

#include "core/config/model_shape.h"

namespace ferry {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t hidden_size, double eps, NormWeight mode = NormWeight::plain);

  // x: (..., C) -> (..., C). plain: with autograd on, the plain libtorch formula (differentiable);
  // with autograd off, kernels::rms_norm (the CUDA kernel for CUDA tensors). one_plus: the libtorch
  // formula.
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // (C)
  double eps;
  NormWeight mode;
};
TORCH_MODULE(RMSNorm);

}  // namespace ferry
