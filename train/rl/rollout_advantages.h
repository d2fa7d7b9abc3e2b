// From a scored rollout to what PPO learns from: the scores shaped (missing-EOS penalty, running
// normalisation, clipping), per-token rewards (-kl_coef x the KL estimate against the reference on
// every response token, plus the score on the last one), then advantages by ppo.advantage_estimator:
// GAE with the critic's values, or, without a critic, the discounted returns of those rewards after
// the score has had its group baseline taken off (rloo: the other responses to the same prompt;
// reinforce_baseline: all of them, OpenRLHF's REINFORCE++-baseline); then whitening.
#pragma once

#include <torch/types.h>

#include "core/config/config.h"
#include "train/rl/experience.h"
#include "train/rl/running_moments.h"

namespace ferry::rl {

// Group ids (B) int64: rows answering the same prompt share one.
torch::Tensor prompt_groups(const std::vector<int64_t>& prompt_index);

// The score each response learns from: raw_scores - missing_eos_penalty where the response did not
// end, then (normalize_reward) (s - mean) / std with `moments` updated by this batch first, then
// clipped to +-reward_clip.
torch::Tensor shape_scores(const torch::Tensor& raw_scores, const torch::Tensor& ended, const PpoConfig& settings,
                           rl::RunningMoments& moments);

// Sets experience.advantages (and .returns for GAE): per-token rewards from the KL penalty (none
// without a reference) and the scores, the estimator, whitening. Rows answering the same prompt
// (experience.prompt_index) form a group. Returns the per-token KL estimate (B, R).
torch::Tensor estimate_advantages(Experience& experience, const PpoConfig& settings, double kl_coef);

}  // namespace ferry::rl
