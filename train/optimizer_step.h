// One optimizer step, the same for the trainer (SFT, RM, DPO) and the RL learners (PPO's policy
// and critic, GRPO's policy), after the micro-batches' backward passes:
//   finish the gradients (the engine's streams and hooks are done), sum them over the processes
//   (data parallel), take their global L2 norm (unscaled by the fp16 loss scale), skip the update
//   when it is not finite (counted; with a loss scaler, its rule), else clip to max_grad_norm and
//   step at the learning rate. Zeroing is the start of the next step (engine.zero_grad).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "offload/engine_fwd.h"

namespace ferry {

class LossScaler;

// min(1, max_grad_norm / (grad_norm + 1e-6)), torch.nn.utils.clip_grad_norm_'s multiplier; 1 when
// max_grad_norm <= 0 (no clipping).
double clip_multiplier(double max_grad_norm, double grad_norm);

// After the last backward of a step: the engine's finish_gradients(), then, when `reduce`, its
// reduce_gradients() (the sums over the processes; a no-op for one process).
void finish_step_gradients(offload::ParameterEngine& engine, bool reduce = true);

struct OptimizerStep {
  double learning_rate = 0;
  double max_grad_norm = 0;          // <= 0: no clipping
  std::vector<std::string> models;   // the models stepped and measured; empty: all of them
  LossScaler* scaler = nullptr;      // fp16: the gradients carry its scale, its rule skips steps
  // offload.overlap_step: the engine updated chunks during backward; step(lr, 1) finishes the
  // update whatever the norm (no clipping, no scaling: validated by the config).
  bool overlapped = false;
};

struct OptimizerStepOutcome {
  double grad_norm = 0;  // unscaled global L2 norm of the step's gradients
  bool finite = true;    // false: the update was skipped (overlapped: partly made)
};

// Norm, skip, clip and step, on gradients finish_step_gradients() finished.
OptimizerStepOutcome take_optimizer_step(offload::ParameterEngine& engine, const OptimizerStep& step);

// The RL learners' update of `models`: take_optimizer_step at `learning_rate`, clipped to
// max_grad_norm, without a loss scaler; a skipped (non-finite) update adds one to `skipped`.
OptimizerStepOutcome step_models(offload::ParameterEngine& engine, const std::vector<std::string>& models,
                                 double learning_rate, double max_grad_norm, int64_t& skipped);

}  // namespace ferry
