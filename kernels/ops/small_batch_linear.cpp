// Small-batch linear (see small_batch_linear.h).
#include "kernels/ops/small_batch_linear.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace ferry::kernels {

at::Tensor small_batch_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t k = x.size(-1);
  const int64_t rows = k > 0 ? x.numel() / k : 0;
  const bool transposed = rows > 0 && rows <= kSmallBatchRows && !c10::GradMode::is_enabled() && x.is_cpu() &&
                          weight.is_cpu() && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
                          weight.dim() == 2;
  if (!transposed) return at::linear(x, weight, bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  at::Tensor y = at::mm(weight, x.reshape({rows, k}).t()).t().contiguous();  // (M, N)
  if (bias.defined()) y.add_(bias);
  return y.view(shape);
}

}  // namespace ferry::kernels
