// PPO's learning phase: ppo.ppo_epochs passes over a scored rollout in shuffled minibatches of
// train.micro_batch_size x train.grad_accumulation responses (x the processes of a data-parallel
// run, which split each minibatch's micro-batches and sum their gradients). Per minibatch: the clipped policy
// loss and vf_coef x the clipped value loss (none without a critic, under the rloo and
// reinforce_baseline estimators) (minus entropy_coef x the entropy), each a mean over
// the minibatch's response tokens (micro-batches add up to exactly that mean), plus ptx_coef x an
// SFT micro-batch's mean cross-entropy when ppo.ptx_coef > 0 (one per process, averaged); then one AdamW step for the policy
// (train.learning_rate) and one for the critic (ppo.critic_learning_rate), each clipped to
// train.max_grad_norm by its own gradient norm, and skipped (counted) when its gradients are not
// finite. Only policy and critic are resident candidates: engine.make_resident({}) lets the
// engine page them by group.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "src/metrics/metrics_row.h"
#include "train/rl/router_tally.h"
#include "train/rl/experience.h"
#include "train/rl/experience_gatherer.h"

namespace ferry {
class BatchSource;
class CausalLMImpl;
class ScoreModelImpl;
}  // namespace ferry

namespace ferry::rl {

struct LearnStats {
  double policy_loss = 0, value_loss = 0, entropy = 0, clipfrac = 0, value_clipfrac = 0, approx_kl = 0;
  double ptx_loss = 0;
  double policy_grad_norm = 0, critic_grad_norm = 0;
  int64_t steps = 0, skipped_steps = 0;  // optimizer steps (policy + critic together) and skipped ones
  int64_t tokens = 0;                    // prompt + response tokens through the forward passes
  bool critic = true;                    // false: no value loss (critic-free advantage estimators)
  RouterTally router;                    // a Mixture of Experts' moe_aux_loss and moe_load_imbalance

  MetricValues metrics() const;
};

class PpoLearner {
 public:
  // `ptx`: SFT batches when ppo.ptx_coef > 0, else null.
  PpoLearner(const Config& config, offload::ParameterEngine& engine, RolloutModels models, BatchSource* ptx);

  // Optimizer steps one rollout of `rows` responses takes.
  int64_t steps_per_rollout(int64_t rows) const;
  // Responses per minibatch: train.micro_batch_size x train.grad_accumulation x the processes
  // (data parallel: each runs grad_accumulation micro-batches of each, experience_gatherer.h's own_micro_batches).
  int64_t minibatch_rows() const;
  // Learns from `experience` (advantages and returns set); `step` counts optimizer steps over the
  // run (the LR schedule's position) and advances. `generator` shuffles the minibatches.
  LearnStats learn(const Experience& experience, int64_t& step, int64_t total_steps, at::Generator& generator);

 private:
  const Config& config_;
  offload::ParameterEngine& engine_;
  RolloutModels models_;
  BatchSource* ptx_;
  LearningShare share_;
};

}  // namespace ferry::rl
