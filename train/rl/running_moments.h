// Running mean and standard deviation of every reward score seen so far (ppo.normalize_reward),
// merged batch by batch as TRL's RunningMoments (Chan et al.'s parallel update; the std is the
// unbiased one). Saved in checkpoints so a resumed run normalises as one that never stopped.
#pragma once

#include <torch/types.h>

namespace ferry::rl {

struct RunningMoments {
  double mean = 0.0;
  double std = 1.0;
  double var = 1.0;
  double count = 1e-24;

  // Merges the batch `xs` (any shape, fp32/fp64) into the statistics.
  void update(const torch::Tensor& xs);
};

}  // namespace ferry::rl
