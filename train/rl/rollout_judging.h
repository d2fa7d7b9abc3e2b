// How an RL stage judges a rollout: the rewards applied to it, its answers checked against
// gt_answer, each phase's peak memory and per-rollout figures, and the held-out evaluation before
// the first rollout and after the last.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "src/metrics/metrics_row.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/experience.h"
#include "train/rl/prompt_dataset.h"
#include "train/rl/prompt_eval.h"
#include "train/rl/rewards.h"

namespace ferry::rl {

// Applies `rewards` to a generated and scored rollout: raw_scores becomes the weighted sum (the
// reward model's score, when one is listed, is read from raw_scores first). Returns each reward's
// sum and count (RewardScores::tallies).
std::vector<RewardScores::Tally> apply_rewards(RewardMix& rewards, Experience& experience, const LoadedPrompts& prompts);

// On prompts with a gt_answer: the fraction of sampled answers that are right ("exact_match"), and
// the mean score of right and wrong ones ("reward/right", "reward/wrong"), from raw_scores.
MetricValues judge_responses(const Experience& experience, const LoadedPrompts& prompts, const std::string& end_marker);

// Peak device bytes of each phase, as the engine counts them (weights, gradients, optimizer state).
struct PhasePeaks {
  uint64_t generate = 0, score = 0, learn = 0;

  void add(const ExperienceTimings& timings);
  // "<command>: engine peak device bytes per phase ...: generation ..., scoring ..., learning ..."
  std::string summary(const std::string& command, uint64_t budget) const;
  nlohmann::json json() const;
};

// Per-rollout figures every RL stage logs: response length, the fraction that ended, and each
// phase's time and throughput.
MetricValues rollout_figures(const Experience& experience, const ExperienceTimings& timings, double learn_seconds,
                             double rollout_seconds);

// Greedy answers to data.eval_file, judged before the first rollout and after the last.
class HeldOutEvaluation {
 public:
  HeldOutEvaluation(const Config& config, offload::ParameterEngine& engine, RolloutModels models, ExperienceOptions options,
                    const Tokenizer& tokenizer, const ChatTemplate& chat_template, std::string command);
  ~HeldOutEvaluation();
  // Prints "<command>: <when>: <file>: exact match ..." and returns the figures (null without eval prompts).
  nlohmann::json run(const char* when);
  size_t prompts() const { return prompts_.size(); }
  // Held-out prompts become episodes against the run's environment too (greedy).
  void set_episodes(EpisodeRunner* runner);

 private:
  PromptFile prompts_;
  std::unique_ptr<ExperienceMaker> maker_;
  int64_t batch_size_ = 32;
  std::string end_marker_, file_, command_;
};

}  // namespace ferry::rl
