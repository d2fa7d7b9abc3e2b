// The rewards of a PPO or GRPO run (`rewards:` in the config): verifier (the response against the
// prompt's gt_answer, 1 or 0), model (the frozen reward model's score, computed by the experience
// maker's scoring phase), command (a program the user writes, reward_command.h) and environment
// (what rollout.environment gave each episode; NaN for an episode that faulted), summed with
// their weights. A verifier has no value for a prompt without gt_answer; as in TRL, a reward with
// no value is left out of that row's sum. Non-finite model or command scores make the row's sum
// non-finite, so the stage leaves the response out and counts it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "train/rl/prompt_dataset.h"

namespace ferry::rl {

class RewardCommand;

// How many prompts a run has, and how many of them have a gt_answer (PromptFile::with_answer).
struct PromptCounts {
  int64_t prompts = 0, with_answer = 0;
};

struct RewardScores {
  std::vector<double> total;                            // per response: sum of weight x reward
  std::vector<std::pair<std::string, double>> means;  // "reward/<name>": mean over responses it scored
  // Per listed reward, in order, every one: "reward/<name>", and the sum and count of the finite
  // values it gave (for means over several processes' responses).
  struct Tally {
    std::string name;
    double sum = 0, count = 0;
  };
  std::vector<Tally> tallies;
};

class RewardMix {
 public:
  // `rewards`: the config's list (PPO passes [{model}] when it is empty); `prompt_file` names prompts
  // in errors; `end_marker`: the chat template's end-of-assistant text, which verifiers ignore.
  // Starts every command. Throws ConfigError when a verifier is listed but no prompt has gt_answer.
  RewardMix(std::vector<RewardConfig> rewards, PromptCounts prompts, std::string prompt_file, std::string end_marker,
            std::ostream& log);
  ~RewardMix();

  // The reward model folder of the `model` reward, or empty.
  std::string model_path() const;
  // Scores each response; `model_scores` holds the reward model's score per response when
  // model_path() is set (else it is ignored), `env_rewards` the environment's reward per episode
  // when an environment reward is listed.
  RewardScores score(const std::vector<std::string>& responses, const std::vector<const RolloutPrompt*>& prompts,
                     const std::vector<double>& model_scores, const std::vector<double>& env_rewards = {});
  // "verifier (exact) x 1 + command `...` x 0.5", for the start-up line.
  std::string describe() const;

 private:
  std::vector<RewardConfig> rewards_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<RewardCommand>> commands_;  // one per reward, null unless kind is command
  std::string prompt_file_, end_marker_;
};

// The rewards a PPO run learns from: `rewards`; when that list is empty, the environment's
// (rollout.environment), else the model ppo.reward_model.
std::vector<RewardConfig> ppo_rewards(const Config& config);
// The rewards a GRPO (or online DPO: `stage`) run learns from: `rewards`, or the environment's when
// that list is empty and rollout.environment is set. Throws ConfigError when there is none.
std::vector<RewardConfig> grpo_rewards(const Config& config, const std::string& stage = "GRPO");

}  // namespace ferry::rl
