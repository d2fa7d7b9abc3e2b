// Held-out evaluation of a policy on prompts: greedy answers, their exact-match accuracy against
// gt_answer (answer_match.h) and their mean reward-model score. The RL stages run it before the
// first rollout and after the last, so a run shows what it changed; `ferry pipeline` puts the
// figures in its summary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/rl/experience.h"

namespace ferry::rl {

struct PromptEvaluation {
  int64_t prompts = 0;
  int64_t with_answer = 0;  // prompts that have a gt_answer
  int64_t correct = 0;
  double mean_reward = 0.0;  // NaN when there is no reward model
  double mean_env_reward = 0.0;  // the environment's reward per episode; NaN without an environment
  double mean_length = 0.0;  // response tokens

  double accuracy() const { return with_answer > 0 ? static_cast<double>(correct) / with_answer : 0.0; }
  // "exact match 17/200 (8.5%), mean reward -0.42, mean environment reward 0.3, mean length 3.1 tokens"
  std::string summary() const;
};

// `maker` must generate greedily and hold the policy and (optionally) the reward model, without
// reference or critic; `end_marker` is the chat template's assistant_suffix.
PromptEvaluation evaluate_prompts(ExperienceMaker& maker, const PromptFile& prompts, int64_t batch_size,
                                  const std::string& end_marker);

}  // namespace ferry::rl
