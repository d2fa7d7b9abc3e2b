// What an RL run (PPO, GRPO) starts from: the device, the tokenizer and chat template, the policy,
// the training prompts and the rewards (RlStart); the frozen reference and reward models; and the
// registration of every model with the engine. The rollout is experience_gatherer.h's, its judging
// rollout_judging.h's, the update each stage's own learner.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "src/metrics/metrics_row.h"
#include "src/model/model_heads.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/model_setup.h"
#include "train/rl/experience.h"
#include "train/rl/prompt_dataset.h"
#include "train/rl/prompt_eval.h"
#include "train/rl/rewards.h"

namespace ferry::rl {

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
  CausalLM reference{nullptr};
  bool reference_is_policy_without_lora = false;
  ScoreModel reward{nullptr};

  int64_t count() const { return (reference ? 1 : 0) + (reward ? 1 : 0); }
};

// `kl_setting` names the key that turns the KL penalty off, for the error without model.path.
FrozenRlModels load_frozen_models(const Config& config, at::ScalarType dtype, const Tokenizer& tokenizer, bool uses_kl,
                                  const char* kl_setting, const std::string& reward_folder);

// Registers the policy (trained), the frozen models and the critic (trained; may be null) with the
// engine, in that order, moves them to `device`, and returns them as a rollout sees them.
RolloutModels register_rl_models(offload::ParameterEngine& engine, CausalLMImpl& policy, FrozenRlModels& frozen,
                                 ScoreModelImpl* critic, const c10::Device& device);

}  // namespace ferry::rl
