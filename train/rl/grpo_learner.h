// GRPO's learning phase: grpo.num_iterations passes over a rollout in shuffled minibatches of
// train.micro_batch_size x train.grad_accumulation completions (x the processes of a data-parallel
// run, which split each minibatch's micro-batches and sum their gradients), one AdamW step per minibatch
// (clipped to train.max_grad_norm; skipped and counted when the gradients are not finite). Each
// micro-batch's loss is train/rl/grpo_loss.h's, scaled as TRL scales it under gradient accumulation.
// The old log-probs are the rollout's (scored before the first pass) when num_iterations > 1, else
// the current ones detached (TRL's shortcut: the same values, one forward fewer).
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "src/metrics/metrics_row.h"
#include "train/rl/router_tally.h"
#include "train/rl/experience.h"
#include "train/rl/experience_gatherer.h"

namespace ferry::rl {

struct GrpoLearnStats {
  double loss = 0, kl = 0, entropy = 0, clip_low = 0, clip_high = 0, grad_norm = 0;
  int64_t steps = 0, skipped_steps = 0;
  int64_t tokens = 0;  // prompt + response tokens through the forward passes
  bool with_kl = false;
  RouterTally router;  // a Mixture of Experts' moe_aux_loss and moe_load_imbalance

  MetricValues metrics() const;
};

class GrpoLearner {
 public:
  GrpoLearner(const Config& config, offload::ParameterEngine& engine, RolloutModels models);

  int64_t steps_per_rollout(int64_t rows) const;
  // Completions per minibatch: train.micro_batch_size x train.grad_accumulation x the processes.
  int64_t minibatch_rows() const;
  // Learns from `experience` (advantages set, (B, R) with each row's value); `step` counts optimizer
  // steps over the run and advances.
  GrpoLearnStats learn(const Experience& experience, int64_t& step, int64_t total_steps, at::Generator& generator);

 private:
  const Config& config_;
  offload::ParameterEngine& engine_;
  RolloutModels models_;
  LearningShare share_;
};

}  // namespace ferry::rl
