// PPO's per-token quantities (see policy_losses.h).
#include "train/rl/policy_losses.h"

#include "core/error.h"
#include "train/rl/advantages.h"

namespace ferry::rl {

torch::Tensor kl_penalty(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs, const torch::Tensor& mask,
                         KlEstimator estimator) {
  const torch::Tensor m = mask.to(logprobs.scalar_type());
  const torch::Tensor log_ratio = (ref_logprobs - logprobs) * m;
  switch (estimator) {
    case KlEstimator::k1: return -log_ratio;
    case KlEstimator::k2: return 0.5 * log_ratio * log_ratio;
    case KlEstimator::k3: return (log_ratio.exp() - 1 - log_ratio) * m;
  }
  throw InternalError("unhandled ppo.kl_estimator");
}

torch::Tensor token_rewards(const torch::Tensor& kl, const torch::Tensor& scores, const torch::Tensor& mask,
                            double kl_coef) {
  const torch::Tensor m = mask.to(kl.scalar_type());
  torch::Tensor rewards = -kl_coef * kl * m;
  // Each row's last counted token (a multi-turn episode's mask has holes).
  const torch::Tensor last = (counted_lengths(m) - 1).clamp_min(0);
  const torch::Tensor has_tokens = m.sum(1).gt(0).to(kl.scalar_type());
  return rewards.scatter_add(1, last.unsqueeze(1), (scores.to(kl.scalar_type()) * has_tokens).unsqueeze(1));
}

ClippedLoss clipped_policy_loss(const torch::Tensor& new_logprobs, const torch::Tensor& old_logprobs,
                                const torch::Tensor& advantages, const torch::Tensor& mask, double clip_eps) {
  const torch::Tensor m = mask.to(new_logprobs.scalar_type());
  const torch::Tensor ratio = torch::exp(new_logprobs - old_logprobs);
  const torch::Tensor unclipped = -advantages * ratio;
  const torch::Tensor clipped = -advantages * torch::clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps);
  return {torch::max(unclipped, clipped) * m, clipped.gt(unclipped).to(m.scalar_type()) * m};
}

ClippedLoss clipped_value_loss(const torch::Tensor& values, const torch::Tensor& old_values,
                               const torch::Tensor& returns, const torch::Tensor& mask, double clip_eps) {
  const torch::Tensor m = mask.to(values.scalar_type());
  const torch::Tensor clipped_values = torch::clamp(values, old_values - clip_eps, old_values + clip_eps);
  const torch::Tensor unclipped = (values - returns).square();
  const torch::Tensor clipped = (clipped_values - returns).square();
  return {0.5 * torch::max(unclipped, clipped) * m, clipped.gt(unclipped).to(m.scalar_type()) * m};
}

}  // namespace ferry::rl
