// What an RL run starts from (see rl_start.h).
#include "train/rl/rl_start.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/engine.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/sampling.h"
#include "src/metrics/metrics_clock.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "train/device_choice.h"
#include "train/model_setup.h"
#include "train/rl/answer_match.h"
#include "train/rl/rewards.h"

namespace ferry::rl {

RlStart::RlStart(const Config& config, const char* command, std::vector<RewardConfig> reward_list)
    : device(training_device(config.train.device)),
      dtype(weight_dtype(config.train.precision)),
      tokenizer(tokenizer_path(config)),
      chat_template(resolve_chat_template(config.tokenizer, tokenizer)) {
  if (config.train.precision == Precision::fp16) {
    throw ConfigError(std::string("train.precision: ") + command +
                      " runs in fp32 or bf16 (no fp16 loss scaling for its updates); set train.precision=bf16");
  }
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  loaded = load_causal_lm(config, dtype);
  check_tokenizer_fits(tokenizer, loaded.shape);
  std::cout << command << ": chat template " << chat_template.name << " (" << chat_template.source << ")\n";
  const DataConfig& d = config.data;
  prompts = PromptFile(d.prompt_file, tokenizer, chat_template, {d.max_length, d.skip_bad_lines, d.max_samples, RowFormat::from_config(d)},
                       std::cout);
  rewards = std::make_unique<RewardMix>(std::move(reward_list),
                                        PromptCounts{static_cast<int64_t>(prompts.size()), prompts.with_answer()},
                                        d.prompt_file, chat_template.assistant_suffix, std::cout);
  prepare_lora(*loaded.model, config);
}

RlStart::~RlStart() = default;

void freeze_parameters(torch::nn::Module& module) {
  for (auto& p : module.parameters()) p.set_requires_grad(false);
}

FrozenRlModels load_frozen_models(const Config& config, at::ScalarType dtype, const Tokenizer& tokenizer, bool uses_kl,
                                  const char* kl_setting, const std::string& reward_folder) {
  FrozenRlModels out;
  const bool lora = config.lora.rank > 0;
  out.reference_is_policy_without_lora = uses_kl && lora;
  if (uses_kl && !lora) {
    if (config.model.path.empty()) {
      throw ConfigError(std::string("model.path: the KL penalty needs the starting policy as a reference; start from a "
                                    "model folder, or set ") + kl_setting + "=0");
    }
    out.reference = causal_lm_from_pretrained(config.model.path, dtype, c10::kCPU);
    freeze_parameters(*out.reference);
  }
  if (!reward_folder.empty()) {
    out.reward = score_model_from_pretrained(reward_folder, dtype, c10::kCPU, /*from_causal_lm=*/false);
    freeze_parameters(*out.reward);
    check_tokenizer_fits(tokenizer, out.reward->config());
  }
  return out;
}

RolloutModels register_rl_models(offload::ParameterEngine& engine, CausalLMImpl& policy, FrozenRlModels& frozen,
                                 ScoreModelImpl* critic, const c10::Device& device) {
  RolloutModels models;
  models.policy = &policy;
  engine.add_model(models.policy_name, offload::group_parameters(policy, false), /*trainable=*/true);
  policy.to(device);
  if (frozen.reference) {
    engine.add_model(models.reference_name, offload::group_parameters(*frozen.reference, false), /*trainable=*/false);
    models.reference = frozen.reference.get();
    frozen.reference->to(device);
  }
  models.reference_is_policy_without_lora = frozen.reference_is_policy_without_lora;
  if (critic != nullptr) {
    engine.add_model(models.critic_name, offload::group_parameters(*critic, false), /*trainable=*/true);
    models.critic = critic;
    critic->to(device);
  }
  if (frozen.reward) {
    engine.add_model(models.reward_name, offload::group_parameters(*frozen.reward, false), /*trainable=*/false);
    models.reward = frozen.reward.get();
    frozen.reward->to(device);
  }
  return models;
}

}  // namespace ferry::rl
