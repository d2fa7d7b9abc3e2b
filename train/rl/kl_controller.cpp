// Adaptive KL coefficient (see kl_controller.h).
#include "train/rl/kl_controller.h"

#include <algorithm>

namespace ferry::rl {

void KlController::update(double kl, int64_t responses) {
  if (target_ <= 0) return;
  const double error = std::clamp(kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + error * static_cast<double>(responses) / horizon_;
}

}  // namespace ferry::rl
