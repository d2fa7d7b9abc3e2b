// Critic-free advantages, from the rewards of several responses to the same prompt (a group;
// `group` gives each row's group id, e.g. row / num_generations):
// - GRPO (TRL's GRPOTrainer): (r - group mean) / (std + 1e-4), the std taken within the group, over
//   the whole batch, or not at all; means and stds skip non-finite rewards (TRL's nanmean/nanstd),
//   so a group of equal rewards gives advantage 0, never NaN;
// - RLOO: r minus the mean of the other responses' rewards in the group;
// - REINFORCE++-baseline: r minus the group mean (the stage then whitens over the batch);
// and discounted returns of per-token rewards, what RLOO and REINFORCE++ learn from per token.
#pragma once

#include <torch/types.h>

#include "core/config/config_enum.h"

namespace ferry::rl {

// (B) rewards, (B) int64 group ids -> (B) advantages.
torch::Tensor group_advantages(const torch::Tensor& rewards, const torch::Tensor& group, RewardScaling scaling);
// r_i - (sum of the group - r_i) / (n - 1); 0 for a response alone in its group.
torch::Tensor leave_one_out_baseline(const torch::Tensor& rewards, const torch::Tensor& group);
// r_i - mean of the group.
torch::Tensor group_mean_baseline(const torch::Tensor& rewards, const torch::Tensor& group);
// G_t = r_t + gamma G_{t+1} over (B, T) per-token rewards, 0 outside the mask.
torch::Tensor discounted_returns(const torch::Tensor& rewards, const torch::Tensor& mask, double gamma);
// Consecutive groups of `size` rows: 0 0 0 1 1 1 ...
torch::Tensor consecutive_groups(int64_t rows, int64_t size);

}  // namespace ferry::rl
