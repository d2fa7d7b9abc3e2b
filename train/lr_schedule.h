// Learning-rate schedules: linear warmup, then cosine, linear or constant, with an optional floor
// (train.min_lr_ratio). The same curves as transformers' get_cosine_with_min_lr_schedule_with_warmup,
// get_linear_schedule_with_warmup and get_constant_schedule_with_warmup (tested against them).
#pragma once

#include <cstdint>

#include "core/config/config_enum.h"

namespace ferry {

struct LrSchedulePlan {
  double peak_lr = 0;
  LrSchedule kind = LrSchedule::cosine;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0;
};

// The learning rate for optimizer step `step` (0-based: the first update uses step 0, which is
// 0 during warmup, as in transformers' LambdaLR).
double learning_rate_at(const LrSchedulePlan& plan, int64_t step);

}  // namespace ferry
