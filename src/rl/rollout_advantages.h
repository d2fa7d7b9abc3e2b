// From a scored rollout to what PPO learns from: the scores shaped (missing-EOS penalty, running
// normalisation, clipping), per-token rewards (-kl_coef x the KL estimate against the reference on
// every response token, plus the score on the last one), GAE and advantage whitening.
#pragma once

#include <torch/types.h>

#include "src/config/config.h"
#include "src/rl/experience.h"
#include "src/rl/running_moments.h"

namespace ferry {

// The score each response learns from: raw_scores - missing_eos_penalty where the response did not
// end, then (normalize_reward) (s - mean) / std with `moments` updated by this batch first, then
// clipped to +-reward_clip.
torch::Tensor shape_scores(const torch::Tensor& raw_scores, const torch::Tensor& ended, const PpoConfig& settings,
                           rl::RunningMoments& moments);

// Sets experience.advantages and .returns: per-token rewards from the KL penalty (none without a
// reference) and the scores, GAE, whitening. Returns the per-token KL estimate (B, R).
torch::Tensor estimate_advantages(Experience& experience, const PpoConfig& settings, double kl_coef);

}  // namespace ferry
