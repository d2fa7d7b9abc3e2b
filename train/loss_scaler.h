// Dynamic loss scaling for fp16 training, with torch.amp.GradScaler's rules: multiply the loss by
// `scale`; if any gradient is inf/NaN, skip the step and halve the scale; after `growth_interval`
// good steps in a row, double it. bf16 and fp32 need no scaling (scale stays 1).
#pragma once

#include <cstdint>

namespace ferry {

class LossScaler {
 public:
  struct State {
    double scale = 1.0;
    int64_t good_steps = 0;    // consecutive finite steps since the last change
    int64_t skipped_steps = 0;  // total steps skipped for overflow
  };

  LossScaler(bool enabled, double initial_scale, double growth_factor = 2.0, double backoff_factor = 0.5,
             int64_t growth_interval = 2000);

  bool enabled() const { return enabled_; }
  double scale() const { return state_.scale; }

  // Call once per optimizer step with whether all gradients were finite. Returns true when the
  // optimizer step should run (gradients finite), false when it must be skipped.
  bool update(bool gradients_finite);

  const State& state() const { return state_; }
  void restore(const State& state) { state_ = state; }

 private:
  bool enabled_;
  double growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  State state_;
};

}  // namespace ferry
