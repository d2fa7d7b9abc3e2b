// Scores to advantages (see rollout_advantages.h).
#include "src/rl/rollout_advantages.h"

#include "src/rl/advantages.h"
#include "src/rl/masked_stats.h"
#include "src/rl/policy_losses.h"

namespace ferry {

torch::Tensor shape_scores(const torch::Tensor& raw_scores, const torch::Tensor& ended, const PpoConfig& settings,
                           rl::RunningMoments& moments) {
  torch::Tensor scores = raw_scores.to(torch::kFloat);
  if (settings.missing_eos_penalty > 0) scores = scores - settings.missing_eos_penalty * (~ended).to(torch::kFloat);
  if (settings.normalize_reward) {
    moments.update(scores);
    scores = (scores - moments.mean) / moments.std;
  }
  if (settings.reward_clip > 0) scores = scores.clamp(-settings.reward_clip, settings.reward_clip);
  return scores;
}

torch::Tensor estimate_advantages(Experience& experience, const PpoConfig& settings, double kl_coef) {
  const torch::Tensor& mask = experience.response_mask;
  const torch::Tensor kl = experience.ref_logprobs.defined()
                               ? rl::kl_penalty(experience.logprobs, experience.ref_logprobs, mask, settings.kl_estimator)
                               : torch::zeros_like(experience.logprobs);
  const torch::Tensor rewards = rl::token_rewards(kl, experience.scores, mask, kl_coef);
  const rl::Advantages gae = rl::generalized_advantages(rewards, experience.values, mask, settings.gamma, settings.lam);
  experience.advantages = settings.whiten_advantages ? rl::masked_whiten(gae.advantages, mask) : gae.advantages;
  experience.returns = gae.returns;
  return kl;
}

}  // namespace ferry
