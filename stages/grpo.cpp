// `ferry train-grpo`: models, the rollout loop, metrics and checkpoints (see grpo.h).
#include "stages/grpo.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <iostream>
#include <optional>

#include "offload/accountant.h"
#include "src/core/error.h"
#include "src/data/epoch_order.h"
#include "src/dist/communicator.h"
#include "src/metrics/metrics_clock.h"
#include "src/rl/group_advantages.h"
#include "src/rl/rewards.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/train/run_engine.h"
#include "stages/grpo_learner.h"
#include "stages/ppo_state.h"
#include "stages/rl_run.h"
#include "stages/rollout.h"
#include "stages/rl_stage.h"
#include "stages/stage_common.h"

namespace fs = std::filesystem;

namespace ferry {

void run_grpo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const GrpoConfig& g = config.grpo;
  if (config.rewards.empty()) {
    throw ConfigError("rewards: GRPO learns from rewards you list, e.g. rewards: [{kind: verifier}] (the answer "
                      "against each prompt's gt_answer), a reward model or a command; see configs/README.md");
  }
  const char* const rows_setting = "grpo.generation_batch_size";
  dist::Communicator* comm = dist::process_communicator(config.distributed);
  (void)rollout_share(g.generation_batch_size, comm, rows_setting);  // before loading anything
  RlStart start(config, "GRPO", config.rewards);
  const c10::Device device = start.device;
  const Tokenizer& tokenizer = start.tokenizer;
  const ChatTemplate& chat_template = start.chat_template;
  const LoadedCausalLm& loaded = start.loaded;
  LlamaForCausalLM& policy = start.loaded.model;
  const PromptFile& prompts = start.prompts;
  RewardMix& rewards = *start.rewards;
  const DataConfig& d = config.data;
  const bool lora = config.lora.rank > 0;
  const bool uses_kl = g.beta > 0;
  FrozenRlModels frozen = load_frozen_models(config, start.dtype, tokenizer, uses_kl, "grpo.beta", rewards.model_path());
  auto engine = make_run_engine(config, loaded.shape, device, std::cout, 1 + frozen.count());
  const RolloutModels models = register_rl_models(*engine, *policy, frozen, nullptr, device);
  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  ExperienceOptions options = rollout_options(config, loaded.shape, tokenizer, chat_template, pad_id);
  const RolloutSettings rollout_settings{g.num_generations, config.train.seed, pad_id, rows_setting};
  HeldOutEvaluation evaluation(config, *engine, models, options, tokenizer, chat_template, "train-grpo");
  options.policy_logprobs = g.num_iterations > 1;  // else the learner's own forward gives the old log-probs
  ExperienceMaker maker(*engine, models, options, tokenizer);
  GrpoLearner learner(config, *engine, models);

  std::cout << "train-grpo: " << prompts.size() << " prompts from " << d.prompt_file << ", " << evaluation.prompts()
            << " eval prompts; policy " << loaded.shape.num_parameters() << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "; rewards: " << rewards.describe() << "; reference: "
            << (!uses_kl ? "none (beta 0)" : lora ? "the policy with its LoRA adapters off" : "a frozen copy of model.path")
            << "\n";

  const int64_t prompts_per_rollout = g.generation_batch_size / g.num_generations;
  const int64_t per_pass = (static_cast<int64_t>(prompts.size()) + prompts_per_rollout - 1) / prompts_per_rollout;
  const int64_t total = config.train.max_steps > 0 ? config.train.max_steps : g.num_episodes * per_pass;
  const int64_t total_steps = total * learner.steps_per_rollout(g.generation_batch_size);
  int64_t step = 0;
  RlRun run(config, *engine, "train-grpo",
            {{stage_trained_model(models.policy_name, *policy, loaded.shape, config, tokenizer), "policy"}},
            [&](PpoState& state) { state.optimizer_steps = step; });
  PpoState& state = run.state;
  if (!run.resume(total)) state.first_eval = evaluation.run("before training");
  EpochSampler sampler(prompts.size(), static_cast<uint64_t>(config.train.seed), d.shuffle, run.prompt_cursor);
  step = state.optimizer_steps;

  std::cout << "train-grpo: " << total << " rollouts of " << prompts_per_rollout << " prompts x " << g.num_generations
            << " completions, " << g.num_iterations << " pass(es) in minibatches of "
            << learner.minibatch_rows() << " (" << total_steps
            << " optimizer steps); loss " << enum_name(g.loss_type) << ", " << enum_name(g.importance_sampling_level)
            << "-level ratios\n"
            << engine->memory_report().summary();
  run.start();
  PhasePeaks& peaks = run.peaks;
  while (run.rollout < total) {
    const double started = monotonic_seconds();
    const std::vector<int64_t> indices = sampler.next(static_cast<size_t>(prompts_per_rollout));
    Rollout made = make_rollout(maker, rewards, prompts, indices, run.rollout, rollout_settings, comm);
    Experience& experience = made.experience;
    const LoadedPrompts& batch_prompts = made.prompts;
    const ExperienceTimings& timings = made.timings;
    MetricValues values = made.reward_means;
    at::Generator generator = learning_generator(config.train.seed, run.rollout);
    peaks.add(timings);
    const Experience as_sampled = experience;
    const MetricValues judged = judge_responses(experience, batch_prompts, chat_template.assistant_suffix);

    // Advantages within each prompt's group, before any row is left out (TRL's nan-skipping statistics).
    const torch::Tensor groups = rl::consecutive_groups(experience.rows(), g.num_generations);
    const torch::Tensor advantages = rl::group_advantages(experience.raw_scores, groups, g.scale_rewards);
    experience.scores = experience.raw_scores;
    experience.advantages = advantages.unsqueeze(1).expand({experience.rows(), experience.response_length()}).contiguous();
    const double zero_std_groups =  // groups whose rewards were all equal: advantage 0 throughout
        (advantages.view({-1, g.num_generations}).abs().amax(1) == 0).to(torch::kFloat).mean().item<double>();
    if (g.mask_truncated_completions) {
      experience.response_mask = experience.response_mask * experience.ended.to(torch::kFloat).unsqueeze(1);
    }
    const int64_t sampled = experience.rows();
    const int64_t dropped = drop_nonfinite_rows(experience);
    run.dropped_rows += dropped;
    if (dropped > 0) {
      std::cout << "warning: rollout " << run.rollout + 1 << ": " << dropped << " of " << sampled
                << " completions had a non-finite reward or log-prob and were left out\n";
    }
    double learn_seconds = 0;
    const torch::Tensor raw = as_sampled.raw_scores.to(torch::kDouble);
    values.insert(values.begin(), {"reward/mean", torch::nanmean(raw).item<double>()});
    values.insert(values.begin() + 1, {"reward/std", sampled > 1 ? raw.std().item<double>() : 0.0});
    values.push_back({"frac_reward_zero_std", zero_std_groups});
    if (experience.rows() > 0) {
      engine->reset_memory_peaks();
      const double learn_started = monotonic_seconds();
      const GrpoLearnStats learned = learner.learn(experience, step, total_steps, generator);
      learn_seconds = monotonic_seconds() - learn_started;
      peaks.learn = std::max(peaks.learn, engine->accountant().peak(offload::MemoryTier::device));
      run.skipped_steps += learned.skipped_steps;
      values.insert(values.begin(), {"loss", learned.loss});
      const MetricValues learned_values = learned.metrics();
      values.insert(values.end(), learned_values.begin(), learned_values.end());
      values.push_back({"tokens_per_s/learn", static_cast<double>(learned.tokens) / std::max(learn_seconds, 1e-9)});
    } else {
      std::cout << "warning: rollout " << run.rollout + 1 << ": no completion left to learn from; the policy was not updated\n";
    }
    values.insert(values.end(), judged.begin(), judged.end());
    const MetricValues figures = rollout_figures(as_sampled, timings, learn_seconds, monotonic_seconds() - started);
    values.insert(values.end(), figures.begin(), figures.end());
    run.end_rollout(values, sampler.cursor());
  }
  run.end(sampler.cursor());
  const nlohmann::json last_eval = evaluation.run("after training");

  run.finish(last_eval, step, nullptr);
}

}  // namespace ferry
