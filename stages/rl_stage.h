// What the RL stages (PPO, GRPO) share around their update: the sampling settings of a rollout,
// its prompts (each repeated for a group of responses), the rewards applied to it, the judging of
// its responses against gt_answer, the held-out evaluation before and after training, and the
// frozen reference policy. The update itself is each stage's own learner.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "src/config/config.h"
#include "src/metrics/metrics_row.h"
#include "src/model/llama_heads.h"
#include "src/rl/experience.h"
#include "src/rl/prompt_dataset.h"
#include "src/rl/prompt_eval.h"
#include "src/rl/rewards.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "stages/stage_common.h"

namespace ferry {

class ParameterEngine;

// What every RL stage starts from: the device and weight dtype, the seeded default generator, the
// tokenizer and chat template, the policy (model.path, LoRA prepared), the training prompts
// (data.prompt_file) and the rewards. `command` names the stage in errors (fp16 is refused).
struct RlStart {
  RlStart(const Config& config, const char* command, std::vector<RewardConfig> reward_list);
  ~RlStart();

  c10::Device device;
  at::ScalarType dtype;
  Tokenizer tokenizer;
  ChatTemplate chat_template;
  LoadedCausalLm loaded;
  PromptFile prompts;
  std::unique_ptr<RewardMix> rewards;
};

void freeze_parameters(torch::nn::Module& module);

// The frozen models of an RL run besides the policy: the reference when the KL penalty needs one
// (with LoRA the policy with its adapters off, so none is loaded; else a frozen copy of
// model.path) and the reward model when the rewards list one.
struct FrozenRlModels {
  LlamaForCausalLM reference{nullptr};
  bool reference_is_policy_without_lora = false;
  LlamaForScore reward{nullptr};

  int64_t count() const { return (reference ? 1 : 0) + (reward ? 1 : 0); }
};

// `kl_setting` names the key that turns the KL penalty off, for the error without model.path.
FrozenRlModels load_frozen_models(const Config& config, at::ScalarType dtype, const Tokenizer& tokenizer, bool uses_kl,
                                  const char* kl_setting, const std::string& reward_folder);

// Registers the policy (trained), the frozen models and the critic (trained; may be null) with the
// engine, in that order, moves them to `device`, and returns them as a rollout sees them.
RolloutModels register_rl_models(ParameterEngine& engine, LlamaForCausalLMImpl& policy, FrozenRlModels& frozen,
                                 LlamaForScoreImpl* critic, const c10::Device& device);

// Sampling (generation.*), stop ids and strings, and a scoring micro-batch of 2 x train.micro_batch_size.
ExperienceOptions rollout_options(const Config& config, const LlamaConfig& shape, const Tokenizer& tokenizer,
                                  const ChatTemplate& chat_template, int64_t pad_id);

// The prompts `indices` name (loaded from `prompts`), each `copies` times in a row, as a rollout
// takes them; prompt_index gets their indices.
std::vector<const RolloutPrompt*> repeat_prompts(const LoadedPrompts& prompts, const std::vector<int64_t>& indices,
                                                 int64_t copies, std::vector<int64_t>& prompt_index);

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
  HeldOutEvaluation(const Config& config, ParameterEngine& engine, RolloutModels models, ExperienceOptions options,
                    const Tokenizer& tokenizer, const ChatTemplate& chat_template, std::string command);
  ~HeldOutEvaluation();
  // Prints "<command>: <when>: <file>: exact match ..." and returns the figures (null without eval prompts).
  nlohmann::json run(const char* when);
  size_t prompts() const { return prompts_.size(); }

 private:
  PromptFile prompts_;
  std::unique_ptr<ExperienceMaker> maker_;
  int64_t batch_size_ = 32;
  std::string end_marker_, file_, command_;
};

}  // namespace ferry
