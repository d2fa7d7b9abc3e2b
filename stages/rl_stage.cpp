// Shared parts of the RL stages (see rl_stage.h).
#include "stages/rl_stage.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "src/core/byte_size.h"
#include "src/core/error.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/sampling.h"
#include "src/metrics/metrics_clock.h"
#include "offload/engine.h"
#include "src/model/pretrained.h"
#include "stages/stage_common.h"
#include "src/rl/answer_match.h"
#include "src/rl/rewards.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/train/device_choice.h"

namespace ferry {

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
  prompts = PromptFile(d.prompt_file, tokenizer, chat_template, {d.max_length, d.skip_bad_lines, d.max_samples},
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

RolloutModels register_rl_models(ParameterEngine& engine, LlamaForCausalLMImpl& policy, FrozenRlModels& frozen,
                                 LlamaForScoreImpl* critic, const c10::Device& device) {
  RolloutModels models;
  models.policy = &policy;
  engine.add_model(models.policy_name, group_parameters(policy, false), /*trainable=*/true);
  policy.to(device);
  if (frozen.reference) {
    engine.add_model(models.reference_name, group_parameters(*frozen.reference, false), /*trainable=*/false);
    models.reference = frozen.reference.get();
    frozen.reference->to(device);
  }
  models.reference_is_policy_without_lora = frozen.reference_is_policy_without_lora;
  if (critic != nullptr) {
    engine.add_model(models.critic_name, group_parameters(*critic, false), /*trainable=*/true);
    models.critic = critic;
    critic->to(device);
  }
  if (frozen.reward) {
    engine.add_model(models.reward_name, group_parameters(*frozen.reward, false), /*trainable=*/false);
    models.reward = frozen.reward.get();
    frozen.reward->to(device);
  }
  return models;
}

ExperienceOptions rollout_options(const Config& config, const LlamaConfig& shape, const Tokenizer& tokenizer,
                                  const ChatTemplate& chat_template, int64_t pad_id) {
  ExperienceOptions options;
  options.generate = chat_generate_options(shape, tokenizer, &chat_template);
  options.generate.max_new_tokens = config.generation.max_new_tokens;
  options.generate.sampling = {config.generation.greedy, config.generation.temperature, config.generation.top_k,
                               config.generation.top_p};
  options.generate.stop_strings.insert(options.generate.stop_strings.end(), config.generation.stop_strings.begin(),
                                       config.generation.stop_strings.end());
  check_sampling_options(options.generate.sampling);
  options.micro_batch_size = 2 * config.train.micro_batch_size;  // no gradients: no activations kept
  options.logits_chunk = config.train.logits_chunk;
  options.pad_id = pad_id;
  return options;
}

std::vector<const RolloutPrompt*> repeat_prompts(const LoadedPrompts& prompts, const std::vector<int64_t>& indices,
                                                 int64_t copies, std::vector<int64_t>& prompt_index) {
  std::vector<const RolloutPrompt*> batch;
  prompt_index.clear();
  for (int64_t i : indices) {
    for (int64_t c = 0; c < copies; ++c) {
      batch.push_back(&prompts.at(i));
      prompt_index.push_back(i);
    }
  }
  return batch;
}

std::vector<RewardScores::Tally> apply_rewards(RewardMix& rewards, Experience& experience,
                                               const LoadedPrompts& prompts) {
  std::vector<const RolloutPrompt*> rows;
  for (int64_t i : experience.prompt_index) rows.push_back(&prompts.at(i));
  std::vector<double> model_scores;
  if (!rewards.model_path().empty()) {
    const torch::Tensor s = experience.raw_scores.to(torch::kDouble).contiguous();
    model_scores.assign(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
  }
  const RewardScores scored = rewards.score(experience.responses, rows, model_scores);
  experience.raw_scores = torch::tensor(scored.total, torch::kDouble).to(torch::kFloat);
  return scored.tallies;
}

MetricValues judge_responses(const Experience& experience, const LoadedPrompts& prompts, const std::string& end_marker) {
  double right = 0, judged = 0, right_reward = 0, wrong_reward = 0;
  for (int64_t row = 0; row < experience.rows(); ++row) {
    const RolloutPrompt& prompt = prompts.at(experience.prompt_index[static_cast<size_t>(row)]);
    if (prompt.gt_answer.empty()) continue;
    const bool ok = exact_match(experience.responses[static_cast<size_t>(row)], prompt.gt_answer, end_marker);
    const double r = experience.raw_scores[row].item<double>();
    judged += 1;
    right += ok ? 1 : 0;
    (ok ? right_reward : wrong_reward) += r;
  }
  MetricValues values;
  if (judged > 0) {
    values.push_back({"exact_match", right / judged});
    if (right > 0) values.push_back({"reward/right", right_reward / right});
    if (right < judged) values.push_back({"reward/wrong", wrong_reward / (judged - right)});
  }
  return values;
}

void PhasePeaks::add(const ExperienceTimings& timings) {
  generate = std::max(generate, timings.generate_peak_bytes);
  score = std::max(score, timings.score_peak_bytes);
}

std::string PhasePeaks::summary(const std::string& command, uint64_t budget) const {
  std::string out = detail::concat(command, ": engine peak device bytes per phase (weights, gradients, optimizer state; activations too on a CPU run): generation ",
                                   format_bytes_approx(generate), " (", generate, " bytes), scoring ",
                                   format_bytes_approx(score), " (", score, " bytes), learning ",
                                   format_bytes_approx(learn), " (", learn, " bytes)");
  if (budget > 0) out += detail::concat("; budget ", budget, " bytes");
  return out;
}

nlohmann::json PhasePeaks::json() const { return {{"generate", generate}, {"score", score}, {"learn", learn}}; }

MetricValues rollout_figures(const Experience& experience, const ExperienceTimings& timings, double learn_seconds,
                             double rollout_seconds) {
  MetricValues values;
  if (experience.rows() > 0) {
    values.push_back({"response_length", experience.response_mask.sum(1).mean().item<double>()});
    values.push_back({"ended_fraction", experience.ended.to(torch::kFloat).mean().item<double>()});
  }
  values.push_back({"time/generate", timings.generate_seconds});
  values.push_back({"time/score", timings.score_seconds});
  values.push_back({"time/learn", learn_seconds});
  values.push_back({"time/rollout", rollout_seconds});
  values.push_back({"tokens_per_s/generate",
                    static_cast<double>(timings.generated_tokens) / std::max(timings.generate_seconds, 1e-9)});
  values.push_back({"tokens_per_s/score", static_cast<double>(timings.scored_tokens) / std::max(timings.score_seconds, 1e-9)});
  return values;
}

HeldOutEvaluation::HeldOutEvaluation(const Config& config, ParameterEngine& engine, RolloutModels models,
                                     ExperienceOptions options, const Tokenizer& tokenizer,
                                     const ChatTemplate& chat_template, std::string command)
    : batch_size_(std::max<int64_t>(config.train.micro_batch_size, 32)),
      end_marker_(chat_template.assistant_suffix),
      file_(config.data.eval_file),
      command_(std::move(command)) {
  if (file_.empty()) return;
  prompts_ = PromptFile(file_, tokenizer, chat_template, {config.data.max_length, config.data.skip_bad_lines, 0},
                        std::cout);
  options.generate.sampling.greedy = true;
  options.policy_logprobs = false;
  models.reference = nullptr;
  models.reference_is_policy_without_lora = false;
  models.critic = nullptr;
  maker_ = std::make_unique<ExperienceMaker>(engine, models, options, tokenizer);
}

HeldOutEvaluation::~HeldOutEvaluation() = default;

nlohmann::json HeldOutEvaluation::run(const char* when) {
  if (prompts_.empty()) return nullptr;
  const double started = monotonic_seconds();
  const PromptEvaluation e = evaluate_prompts(*maker_, prompts_, batch_size_, end_marker_);
  std::cout << command_ << ": " << when << ": " << file_ << ": " << e.summary() << " ("
            << monotonic_seconds() - started << " s)\n";
  nlohmann::json j{{"prompts", e.prompts}, {"with_answer", e.with_answer}, {"correct", e.correct},
                   {"accuracy", e.accuracy()}, {"mean_length", e.mean_length}};
  if (!std::isnan(e.mean_reward)) j["mean_reward"] = e.mean_reward;
  return j;
}

}  // namespace ferry
