// KTO's loss (`ferry train-kto`), as TRL 1.16's KTOTrainer computes it (the reference the parity
// test compares against: tests/parity/kto_loss_ref.py). With the log-ratio ρ = log π(y|x) −
// log π_ref(y|x) of each example (summed over its completion's tokens) and the KL estimate
//   z = max(0, mean over the micro-batch's KL rows of (log π(y'|x) − log π_ref(y'|x))), detached
// (y' the completion of another example: kto_batches.h):
//   kto                desirable    w_d (1 − σ(β(ρ − z)))     undesirable  w_u (1 − σ(β(z − ρ)))
//   apo_zero_unpaired  desirable    w_d (1 − σ(βρ))           undesirable  w_u σ(βρ)   (no KL term)
// The micro-batch's loss is the mean over its examples. Logged: kl (z), rewards/chosen and
// rewards/rejected (β ρ over the desirable / undesirable examples), rewards/margins, logps/chosen,
// logps/rejected — each a mean over its class within the micro-batch.
#pragma once

#include <torch/types.h>

#include "core/config/config.h"
#include "src/metrics/metrics_row.h"

namespace ferry {

struct KtoLogps {
  torch::Tensor policy, reference;        // (B): the examples' summed completion log-probs
  torch::Tensor policy_kl, reference_kl;  // (B): the KL rows'; undefined for apo_zero_unpaired
  torch::Tensor desirable;                // (B) bool
};

struct KtoLosses {
  torch::Tensor losses;   // (B), differentiable, weighted; their mean is TRL's loss
  torch::Tensor kl;       // scalar, detached (0 without a KL term)
  torch::Tensor rewards;  // (B) β ρ, detached
};

KtoLosses kto_losses(const KtoConfig& settings, const KtoLogps& logps);

// Summed over the micro-batch's B examples (the loop divides by B): each class mean times B, and
// kl times B, so that the loop's division gives the per-micro-batch values TRL logs. A class
// absent from the micro-batch adds 0.
MetricValues kto_metrics(const KtoLosses& losses, const KtoLogps& logps);

}  // namespace ferry
