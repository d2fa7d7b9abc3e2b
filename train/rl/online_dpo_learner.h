// Online DPO's learning phase (`dpo.online`, as TRL 1.16's experimental OnlineDPOTrainer): a
// rollout holds two sampled answers to each prompt (rows 2i and 2i + 1); the one with the higher
// score is chosen (the first on a tie), and the pair's DPO-family loss (train/preference_losses.h,
// dpo.loss_type and its settings) is taken with the policy's log-probs from a training-mode
// forward (temperature 1, as TRL's) and the reference's from the rollout. One AdamW step per
// rollout, over micro-batches of train.micro_batch_size pairs (the processes of a data-parallel run
// split them), each micro-batch's summed loss divided by the rollout's pairs.
#pragma once

#include <cstdint>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "src/metrics/metrics_row.h"
#include "train/rl/experience.h"
#include "train/rl/experience_gatherer.h"

namespace ferry::rl {

// Row indices (P) of each pair's chosen and rejected answer: pair i is rows 2i and 2i + 1 of
// `scores` (2P), and 2i is chosen when its score is >= 2i + 1's.
struct RankedPairs {
  torch::Tensor chosen, rejected;  // (P) int64
};
RankedPairs rank_pairs(const torch::Tensor& scores);

struct OnlineDpoStats {
  double loss = 0, grad_norm = 0;
  // Means over the pairs (TRL's names): rewards/chosen, rewards/rejected, rewards/margins,
  // rewards/accuracies, logps/chosen, logps/rejected; over the answers: objective/kl (Σ over the
  // answer of log π − log π_ref), objective/entropy (−Σ log π), objective/non_score_reward (−β kl).
  MetricValues values;
  int64_t skipped_steps = 0;
  int64_t tokens = 0;  // prompt + answer tokens through the forwards
};

// The pairs' losses (P) and logged sums, for one micro-batch of ranked pairs: the policy's summed
// answer log-probs `policy` (2P: chosen then rejected, with gradients), the reference's
// `reference` (2P), the answers' token counts `tokens` (2P) and, for LD-DPO, the per-token values
// (2P, R) with the answer mask.
struct PairLosses {
  torch::Tensor losses;  // (P)
  MetricValues sums;     // summed over the P pairs (rewards/..., logps/...)
};
PairLosses online_pair_losses(const DpoConfig& settings, const torch::Tensor& token_logps,
                              const torch::Tensor& reference_token_logps, const torch::Tensor& mask);

class OnlineDpoLearner {
 public:
  OnlineDpoLearner(const Config& config, offload::ParameterEngine& engine, RolloutModels models);

  // Pairs per rollout: train.micro_batch_size x train.grad_accumulation x the processes.
  int64_t pairs_per_rollout() const { return share_.minibatch_rows; }
  // One optimizer step on the rollout's pairs (ranked by experience.scores; ref_logprobs set).
  OnlineDpoStats learn(const Experience& experience, int64_t& step, int64_t total_steps);

 private:
  const Config& config_;
  offload::ParameterEngine& engine_;
  RolloutModels models_;
  LearningShare share_;
};

}  // namespace ferry::rl
