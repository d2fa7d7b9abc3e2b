// Warmup + decay schedules.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ferry {

double learning_rate_at(const LrSchedulePlan& plan, int64_t step) {
  if (step < plan.warmup_steps) {
    return plan.peak_lr * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, plan.warmup_steps));
  }
  const double decay_steps = static_cast<double>(std::max<int64_t>(1, plan.total_steps - plan.warmup_steps));
  const double progress = static_cast<double>(step - plan.warmup_steps) / decay_steps;
  double factor = 1.0;
  switch (plan.kind) {
    case LrSchedule::constant:
      return plan.peak_lr;
    case LrSchedule::cosine:
      factor = std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
      break;
    case LrSchedule::linear:
      factor = std::max(0.0, static_cast<double>(plan.total_steps - step) / decay_steps);
      break;
  }
  return plan.peak_lr * (factor * (1.0 - plan.min_lr_ratio) + plan.min_lr_ratio);
}

}  // namespace ferry
