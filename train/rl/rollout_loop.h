// The loop every RL stage runs once its models are set up, the same for PPO and GRPO: per rollout,
// take the next prompts, generate, score and reward them (experience_gatherer.h), judge the
// answers, leave out rows with non-finite values, learn from the rest, and log and checkpoint
// through the RL run (rl_run_lifecycle.h). What differs is an RlAlgorithm: the advantages, the
// learning phase and the figures it logs.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <optional>
#include <string>

#include "offload/engine_fwd.h"
#include "src/data/epoch_order.h"
#include "src/metrics/metrics_row.h"
#include "train/rl/experience.h"
#include "train/rl/experience_gatherer.h"

namespace ferry::rl {

class RlRunLifecycle;

// What a learning phase reports.
struct LearnedRollout {
  MetricValues values;        // its figures (the loop adds tokens_per_s/learn)
  int64_t skipped_steps = 0;  // optimizer steps skipped for non-finite gradients
  int64_t tokens = 0;         // tokens learned from, for tokens_per_s/learn
};

// An RL algorithm's own parts of a rollout.
class RlAlgorithm {
 public:
  virtual ~RlAlgorithm() = default;
  // Over every sampled row, before rows with non-finite values are left out (GRPO's group advantages).
  virtual void before_drop(Experience& experience) {}
  // On the rows left (at least one), before the learning phase is timed (PPO's scores, KL and GAE).
  virtual void before_learn(Experience& experience) {}
  // The learning phase, on the rows left; `generator` shuffles its minibatches.
  virtual LearnedRollout learn(Experience& experience, at::Generator& generator) = 0;
  // The rollout's logged values, before the judged answers and the rollout's figures; `learned`
  // is null when no row was left to learn from.
  virtual MetricValues values(const Rollout& rollout, const Experience& as_sampled, const MetricValues* learned) = 0;
  // For the warnings: what a row is ("response"; an s makes the plural), what was not finite, what
  // was not updated.
  virtual const char* row_name() const = 0;
  virtual const char* nonfinite_what() const = 0;
  virtual const char* not_updated() const = 0;
};

// What the loop draws from.
struct RolloutSources {
  ExperienceMaker& maker;
  RewardMix& rewards;
  const PromptFile& prompts;
  EpochSampler& sampler;
  int64_t prompts_per_rollout = 0;
  RolloutSettings settings;
  offload::ParameterEngine& engine;
  std::string end_marker;  // the chat template's assistant suffix, where a judged answer ends
};

// Runs rollouts until `run` has `total`, then ends the run (a last checkpoint, metrics closed).
void run_rollout_loop(RlRunLifecycle& run, int64_t total, const RolloutSources& sources, RlAlgorithm& algorithm);

}  // namespace ferry::rl
