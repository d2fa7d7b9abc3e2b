// What a training stage hands the shared loop (trainer.h): where micro-batches come from
// (BatchSource) and how a micro-batch becomes a loss (TrainingObjective). SFT, RM and DPO differ
// only in these two objects; precision, accumulation, clipping, schedules, evaluation,
// checkpoints and metrics are the loop's.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/data/epoch_order.h"
#include "src/metrics/metrics_row.h"

namespace ferry {

class BackboneRunner;

// One micro-batch: named CPU tensors (SFT: input_ids, attention_mask, labels, position_ids and,
// when packed, a bool (B, 1, T, T) mask under "attention_mask"), plus its weight in the loss.
struct MicroBatch {
  std::map<std::string, torch::Tensor> tensors;
  // The units the objective's loss sums over (SFT: label tokens after the shift; RM/DPO: pairs).
  // The loop divides the summed loss of an optimizer step by the sum of its micro-batches'
  // weights, so micro_batch 2 x accumulation 2 trains exactly as micro_batch 4 x 1.
  int64_t loss_weight = 0;
  int64_t tokens = 0;  // real (non-pad) tokens, for tokens/s

  const torch::Tensor& at(const std::string& name) const;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Micro-batches in one pass over the training data (for `train.epochs`).
  virtual int64_t batches_per_epoch() const = 0;
  virtual MicroBatch next_train_batch() = 0;
  // Where the next training batch comes from; saved in checkpoints and restored on resume.
  virtual DataCursor cursor() const = 0;
  virtual void restore(const DataCursor& cursor) = 0;
  // The evaluation set in fixed order (empty: no evaluation).
  virtual std::vector<MicroBatch> eval_batches() const = 0;
};

// The loss of one micro-batch: a scalar that is the SUM over its loss_weight units (the loop
// does the division), plus extra values to log (summed over units too, e.g. "accuracy").
struct LossSum {
  torch::Tensor sum;  // fp32 scalar, differentiable
  MetricValues extra;
};

class TrainingObjective {
 public:
  virtual ~TrainingObjective() = default;
  // Runs the models through `runner` (which moves the batch to the device and calls the engine's
  // hooks) and returns the summed loss.
  virtual LossSum loss(const MicroBatch& batch, BackboneRunner& runner) = 0;
};

}  // namespace ferry
