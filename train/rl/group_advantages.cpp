// Critic-free advantages (see group_advantages.h).
#include "train/rl/group_advantages.h"

#include <ATen/ATen.h>

#include "train/rl/advantages.h"

namespace ferry::rl {
namespace {

// Per row: the sum and the count of its group's finite values (float64).
struct GroupSums {
  at::Tensor sum, count;
};

GroupSums group_sums(const at::Tensor& values, const at::Tensor& group) {
  const int64_t groups = group.numel() == 0 ? 0 : group.max().item<int64_t>() + 1;
  const at::Tensor finite = at::isfinite(values);
  const at::Tensor v = at::where(finite, values, at::zeros_like(values));
  const at::Tensor sum = at::zeros({groups}, values.options()).index_add_(0, group, v);
  const at::Tensor count = at::zeros({groups}, values.options()).index_add_(0, group, finite.to(values.scalar_type()));
  return {sum.index_select(0, group), count.index_select(0, group)};
}

// TRL's nanstd over `values` where `group` says (Bessel-corrected; NaN for fewer than two values).
at::Tensor group_nanstd(const at::Tensor& values, const at::Tensor& group) {
  const GroupSums s = group_sums(values, group);
  const at::Tensor mean = s.sum / s.count;
  const GroupSums sq = group_sums((values - mean).pow(2), group);
  const at::Tensor variance = (sq.sum / sq.count) * s.count / (s.count - 1);
  return at::where(s.count > 1, variance.sqrt(), at::full_like(variance, std::numeric_limits<double>::quiet_NaN()));
}

}  // namespace

torch::Tensor group_advantages(const torch::Tensor& rewards, const torch::Tensor& group, RewardScaling scaling) {
  const at::Tensor r = rewards.to(at::kDouble);
  const at::Tensor g = group.to(at::kLong);
  const GroupSums s = group_sums(r, g);
  at::Tensor advantages = r - s.sum / s.count;
  if (scaling == RewardScaling::group) {
    advantages = advantages / (group_nanstd(r, g) + 1e-4);
  } else if (scaling == RewardScaling::batch) {
    const at::Tensor std = r.numel() > 1 ? group_nanstd(r, at::zeros_like(g)) : at::zeros_like(r);
    advantages = advantages / (std + 1e-4);
  }
  return advantages.to(rewards.scalar_type());
}

torch::Tensor leave_one_out_baseline(const torch::Tensor& rewards, const torch::Tensor& group) {
  const at::Tensor r = rewards.to(at::kDouble);
  const GroupSums s = group_sums(r, group.to(at::kLong));
  const at::Tensor others = (s.sum - r) / (s.count - 1);
  return at::where(s.count > 1, r - others, at::zeros_like(r)).to(rewards.scalar_type());
}

torch::Tensor group_mean_baseline(const torch::Tensor& rewards, const torch::Tensor& group) {
  const at::Tensor r = rewards.to(at::kDouble);
  const GroupSums s = group_sums(r, group.to(at::kLong));
  return (r - s.sum / s.count).to(rewards.scalar_type());
}

torch::Tensor discounted_returns(const torch::Tensor& rewards, const torch::Tensor& given_mask, double gamma) {
  const int64_t length = rewards.size(1);
  const torch::Tensor order = counted_first(given_mask);  // over counted tokens only (advantages.h)
  const torch::Tensor mask = given_mask.gather(1, order);
  const at::Tensor r = rewards.gather(1, order) * mask;
  at::Tensor out = at::zeros_like(r);
  at::Tensor next = at::zeros({r.size(0)}, r.options());
  for (int64_t t = length - 1; t >= 0; --t) {
    next = r.select(1, t) + gamma * next;
    out.select(1, t).copy_(next);
  }
  return at::zeros_like(out).scatter(1, order, out * mask);
}

torch::Tensor consecutive_groups(int64_t rows, int64_t size) {
  return at::arange(rows, at::kLong).div(size, "floor");
}

}  // namespace ferry::rl
