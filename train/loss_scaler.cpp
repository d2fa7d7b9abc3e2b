// GradScaler-style dynamic loss scale.
#include "train/loss_scaler.h"

namespace ferry {

LossScaler::LossScaler(bool enabled, double initial_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval)
    : enabled_(enabled),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
  state_.scale = enabled ? initial_scale : 1.0;
}

bool LossScaler::update(bool gradients_finite) {
  if (!enabled_) return gradients_finite;
  if (!gradients_finite) {
    state_.scale *= backoff_factor_;
    state_.good_steps = 0;
    ++state_.skipped_steps;
    return false;
  }
  if (++state_.good_steps == growth_interval_) {
    state_.scale *= growth_factor_;
    state_.good_steps = 0;
  }
  return true;
}

}  // namespace ferry
