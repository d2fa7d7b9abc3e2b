// The per-token quantities PPO learns from, as TRL's PPOTrainer computes them (the log-probs of
// chosen tokens and the entropy come from the LM head: kernels/ops/chunked_lm_head.h): the KL estimators against the reference, the per-token rewards, and
// the clipped policy and value losses. Everything is (B, T) over response positions with a 1/0
// mask of the tokens that count; sums over the mask are the caller's (micro-batches add up).
#pragma once

#include <torch/types.h>

#include "core/config/config_enum.h"

namespace ferry::rl {

// Per-token KL(policy || reference) estimate from the sampled tokens' log-probs, 0 outside the mask:
// with r = ref - policy, k1 = -r, k2 = r^2 / 2, k3 = exp(r) - 1 - r (Schulman's estimators).
torch::Tensor kl_penalty(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs, const torch::Tensor& mask,
                         KlEstimator estimator);

// -kl_coef * kl on every response token, plus each row's score on its last response token.
torch::Tensor token_rewards(const torch::Tensor& kl, const torch::Tensor& scores, const torch::Tensor& mask,
                            double kl_coef);

struct ClippedLoss {
  torch::Tensor per_token;  // (B, T), 0 outside the mask
  torch::Tensor clipped;    // (B, T) 1 where the clipped term was the larger (the clip fraction's count)
};

// PPO's clipped surrogate: max(-A ratio, -A clamp(ratio, 1 - eps, 1 + eps)), ratio = exp(new - old).
ClippedLoss clipped_policy_loss(const torch::Tensor& new_logprobs, const torch::Tensor& old_logprobs,
                                const torch::Tensor& advantages, const torch::Tensor& mask, double clip_eps);
// PPO's clipped value loss: 0.5 max((V - R)^2, (clamp(V, V_old - eps, V_old + eps) - R)^2).
ClippedLoss clipped_value_loss(const torch::Tensor& values, const torch::Tensor& old_values,
                               const torch::Tensor& returns, const torch::Tensor& mask, double clip_eps);

}  // namespace ferry::rl
