// Advantage estimators (see advantages.h).
#include "train/rl/advantages.h"

#include <vector>

namespace ferry::rl {

Advantages generalized_advantages(const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& mask,
                                  double gamma, double lam) {
  const torch::Tensor m = mask.to(values.scalar_type());
  const torch::Tensor v = values * m, r = rewards * m;
  const int64_t length = v.size(1);
  std::vector<torch::Tensor> reversed;
  torch::Tensor last = torch::zeros({v.size(0)}, v.options());
  for (int64_t t = length - 1; t >= 0; --t) {
    const torch::Tensor next_value = t + 1 < length ? v.select(1, t + 1) : torch::zeros_like(last);
    const torch::Tensor delta = r.select(1, t) + gamma * next_value - v.select(1, t);
    last = delta + gamma * lam * last;
    reversed.push_back(last);
  }
  std::vector<torch::Tensor> forward(reversed.rbegin(), reversed.rend());
  const torch::Tensor advantages = torch::stack(forward, 1);
  return {advantages * m, (advantages + v) * m};
}

}  // namespace ferry::rl
