// RMSNorm module: chooses between the autograd formula and the inference kernel, or Gemma's (1 + w).
#include "src/model/rms_norm.h"

#include "kernels/ops/rmsnorm.h"

namespace ferry {

RMSNormImpl::RMSNormImpl(int64_t hidden_size, double eps_, NormWeight mode_) : eps(eps_), mode(mode_) {
  weight = register_parameter("weight", mode == NormWeight::one_plus ? torch::zeros({hidden_size})
                                                                     : torch::ones({hidden_size}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (mode == NormWeight::one_plus) {
    // transformers' Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), all in fp32, then cast.
    const torch::Tensor xf = x.to(torch::kFloat);
    const torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return (normed * (1.0 + weight.to(torch::kFloat))).to(x.scalar_type());
  }
  if (torch::GradMode::is_enabled()) return kernels::rms_norm_reference(x, weight, eps);
  return kernels::rms_norm(x, weight, eps);
}

}  // namespace ferry
