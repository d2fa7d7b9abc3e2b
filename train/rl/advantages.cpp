// Advantage estimators (see advantages.h).
#include "train/rl/advantages.h"

#include <vector>

namespace ferry::rl {

torch::Tensor counted_first(const torch::Tensor& mask) {
  return std::get<1>(mask.gt(0).to(torch::kInt).sort(/*stable=*/true, /*dim=*/1, /*descending=*/true));
}

torch::Tensor counted_lengths(const torch::Tensor& mask) {
  const torch::Tensor columns =
      torch::arange(1, mask.size(1) + 1, torch::TensorOptions().dtype(torch::kLong).device(mask.device()));
  return (mask.gt(0).to(torch::kLong) * columns).amax(1);
}

Advantages generalized_advantages(const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& mask,
                                  double gamma, double lam) {
  const torch::Tensor order = counted_first(mask);
  const torch::Tensor m = mask.to(values.scalar_type()).gather(1, order);
  const torch::Tensor v = values.gather(1, order) * m, r = rewards.gather(1, order) * m;
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
  return {torch::zeros_like(advantages).scatter(1, order, advantages * m),
          torch::zeros_like(advantages).scatter(1, order, (advantages + v) * m)};
}

}  // namespace ferry::rl
