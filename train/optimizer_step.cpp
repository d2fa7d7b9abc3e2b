// One optimizer step (see optimizer_step.h).
#include "train/optimizer_step.h"

#include <algorithm>
#include <cmath>

#include "offload/engine.h"
#include "train/loss_scaler.h"

namespace ferry {

double clip_multiplier(double max_grad_norm, double grad_norm) {
  return max_grad_norm > 0 ? std::min(1.0, max_grad_norm / (grad_norm + 1e-6)) : 1.0;
}

void finish_step_gradients(offload::ParameterEngine& engine, bool reduce) {
  engine.finish_gradients();
  if (reduce) engine.reduce_gradients();
}

OptimizerStepOutcome take_optimizer_step(offload::ParameterEngine& engine, const OptimizerStep& step) {
  const double scale = step.scaler != nullptr ? step.scaler->scale() : 1.0;
  OptimizerStepOutcome outcome;
  outcome.grad_norm = engine.gradient_norm(step.models) / scale;
  outcome.finite = std::isfinite(outcome.grad_norm);
  if (step.overlapped) {
    engine.step(step.learning_rate, 1.0, step.models);
    return outcome;
  }
  const bool take = step.scaler != nullptr ? step.scaler->update(outcome.finite) : outcome.finite;
  if (take) engine.step(step.learning_rate, clip_multiplier(step.max_grad_norm, outcome.grad_norm) / scale, step.models);
  return outcome;
}

OptimizerStepOutcome step_models(offload::ParameterEngine& engine, const std::vector<std::string>& models,
                                 double learning_rate, double max_grad_norm, int64_t& skipped) {
  OptimizerStep request;
  request.learning_rate = learning_rate;
  request.max_grad_norm = max_grad_norm;
  request.models = models;
  const OptimizerStepOutcome outcome = take_optimizer_step(engine, request);
  if (!outcome.finite) ++skipped;
  return outcome;
}

}  // namespace ferry
