// Running reward statistics (see running_moments.h).
#include "train/rl/running_moments.h"

#include <cmath>

namespace ferry::rl {

void RunningMoments::update(const torch::Tensor& xs) {
  const torch::Tensor x = xs.to(torch::kDouble).flatten();
  const double n = static_cast<double>(x.numel());
  if (n == 0) return;
  const double batch_mean = x.mean().item<double>();
  const double batch_var = x.var(/*unbiased=*/false).item<double>();
  const double delta = batch_mean - mean;
  const double total = count + n;
  const double old_sum = var * count + delta * delta * count * n / total;
  mean += delta * n / total;
  var = (old_sum + batch_var * n) / total;
  std = total > 1 ? std::sqrt(var * total / (total - 1)) : 1.0;
  count = total;
}

}  // namespace ferry::rl
