// The KL coefficient over a run: fixed, or adapted towards a target KL (Ziegler et al. 2019, as
// TRL's AdaptiveKLController): e = clip(KL / target - 1, -0.2, 0.2); coef *= 1 + e n / horizon,
// after each rollout of n responses. Its value is saved in checkpoints.
#pragma once

#include <cstdint>

namespace ferry::rl {

class KlController {
 public:
  // target 0: the coefficient stays `initial`.
  KlController(double initial, double target, double horizon) : value_(initial), target_(target), horizon_(horizon) {}

  double value() const { return value_; }
  void set_value(double value) { value_ = value; }
  // `kl`: the rollout's mean KL per response (summed over its tokens); `responses`: n.
  void update(double kl, int64_t responses);

 private:
  double value_, target_, horizon_;
};

}  // namespace ferry::rl
