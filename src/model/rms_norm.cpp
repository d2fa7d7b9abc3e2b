// RMSNorm module: chooses between the autograd formula and the inference kernel.
#include "src/model/rms_norm.h"

#include "kernels/ops/rmsnorm.h"

namespace ferry {

RMSNormImpl::RMSNormImpl(int64_t hidden_size, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({hidden_size}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (torch::GradMode::is_enabled()) return kernels::rms_norm_reference(x, weight, eps);
  return kernels::rms_norm(x, weight, eps);
}

}  // namespace ferry
