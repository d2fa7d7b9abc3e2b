// Advantage estimators: from per-token rewards and values of a rollout (response positions,
// (B, T) with a mask of the tokens that count) to advantages and the returns the critic learns.
// PPO uses GAE; GRPO's group estimators will live here too.
#pragma once

#include <torch/types.h>

namespace ferry::rl {

struct Advantages {
  torch::Tensor advantages;  // (B, T), 0 outside the mask
  torch::Tensor returns;     // (B, T) advantages + values, 0 outside the mask
};

// Generalised advantage estimation as TRL's PPOTrainer: values and rewards outside the mask count
// as 0, so each row's recursion starts after its last response token, exactly as it would on the
// row alone. delta_t = r_t + gamma V_{t+1} - V_t; A_t = delta_t + gamma lam A_{t+1}, where t + 1 is
// the next counted token: a multi-turn episode's recursion runs over the policy's tokens across
// turns, stepping over the environment's tokens between them (mask 0), as if they were adjacent.
// Each row's positions with the counted ones first, in order ((B, T) int64, a permutation per
// row): gather with it to close the holes of a multi-turn mask, scatter with it to put them back.
torch::Tensor counted_first(const torch::Tensor& mask);
// Each row's columns up to and including its last counted one ((B) int64; 0 for a row with none):
// the last counted token is at column lengths - 1, wherever the mask has holes.
torch::Tensor counted_lengths(const torch::Tensor& mask);

Advantages generalized_advantages(const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& mask,
                                  double gamma, double lam);

}  // namespace ferry::rl
