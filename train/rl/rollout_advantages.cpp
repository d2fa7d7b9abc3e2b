// Scores to advantages (see rollout_advantages.h).
#include "train/rl/rollout_advantages.h"

#include <map>

#include "train/rl/advantages.h"
#include "train/rl/group_advantages.h"
#include "train/rl/masked_stats.h"
#include "train/rl/policy_losses.h"

namespace ferry::rl {

torch::Tensor prompt_groups(const std::vector<int64_t>& prompt_index) {
  std::map<int64_t, int64_t> ids;
  std::vector<int64_t> group;
  for (int64_t prompt : prompt_index) group.push_back(ids.emplace(prompt, static_cast<int64_t>(ids.size())).first->second);
  return torch::tensor(group, torch::kLong);
}

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
  if (settings.advantage_estimator == AdvantageEstimator::gae) {
    const torch::Tensor rewards = rl::token_rewards(kl, experience.scores, mask, kl_coef);
    const rl::Advantages gae = rl::generalized_advantages(rewards, experience.values, mask, settings.gamma, settings.lam);
    experience.advantages = settings.whiten_advantages ? rl::masked_whiten(gae.advantages, mask) : gae.advantages;
    experience.returns = gae.returns;
    return kl;
  }
  const torch::Tensor group = prompt_groups(experience.prompt_index);
  const torch::Tensor scores = settings.advantage_estimator == AdvantageEstimator::rloo
                                   ? rl::leave_one_out_baseline(experience.scores, group)
                                   : rl::group_mean_baseline(experience.scores, group);
  const torch::Tensor returns = rl::discounted_returns(rl::token_rewards(kl, scores, mask, kl_coef), mask, settings.gamma);
  experience.advantages = settings.whiten_advantages ? rl::masked_whiten(returns, mask) : returns;
  experience.returns = torch::Tensor();
  return kl;
}

}  // namespace ferry::rl
