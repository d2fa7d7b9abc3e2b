// `ferry train-ppo`: models, the rollout loop, metrics and checkpoints (see ppo.h). The rollout
// itself is src/rl's experience maker; the update is ppo_learner.h.
#include "stages/ppo.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <memory>

#include "offload/accountant.h"
#include "src/core/byte_size.h"
#include "src/core/error.h"
#include "src/data/epoch_order.h"
#include "src/data/sft_dataset.h"
#include "src/dist/communicator.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/sampling.h"
#include "src/metrics/metrics_clock.h"
#include "src/model/pretrained.h"
#include "src/rl/rollout_advantages.h"
#include "src/rl/answer_match.h"
#include "src/rl/kl_controller.h"
#include "src/rl/masked_stats.h"
#include "src/rl/policy_losses.h"
#include "src/rl/prompt_eval.h"
#include "src/rl/rewards.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/train/run_engine.h"
#include "stages/ppo_learner.h"
#include "stages/ppo_state.h"
#include "stages/sft.h"
#include "stages/rl_run.h"
#include "stages/rollout.h"
#include "stages/rl_stage.h"
#include "stages/stage_common.h"

namespace fs = std::filesystem;

namespace ferry {

void run_ppo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const PpoConfig& p = config.ppo;
  const char* const rows_setting = "ppo.rollout_batch_size x ppo.num_generations";
  dist::Communicator* comm = dist::process_communicator(config.distributed);
  (void)rollout_share(p.rollout_batch_size * p.num_generations, comm, rows_setting);  // before loading anything
  RlStart start(config, "PPO", ppo_rewards(config));
  const c10::Device device = start.device;
  const at::ScalarType dtype = start.dtype;
  const Tokenizer& tokenizer = start.tokenizer;
  const ChatTemplate& chat_template = start.chat_template;
  const LoadedCausalLm& loaded = start.loaded;
  LlamaForCausalLM& policy = start.loaded.model;
  const PromptFile& prompts = start.prompts;
  RewardMix& rewards = *start.rewards;
  const DataConfig& d = config.data;
  const bool lora = config.lora.rank > 0;
  const bool uses_kl = p.kl_coef > 0 || p.kl_target > 0;
  FrozenRlModels frozen = load_frozen_models(config, dtype, tokenizer, uses_kl, "ppo.kl_coef", rewards.model_path());
  const bool gae = p.advantage_estimator == AdvantageEstimator::gae;
  const std::string reward_folder = rewards.model_path();
  const std::string critic_folder =
      !gae ? "" : !p.critic_model.empty() ? p.critic_model : !p.reward_model.empty() ? p.reward_model : reward_folder;
  if (gae && critic_folder.empty()) {
    throw ConfigError("ppo.critic_model: advantages from GAE need a critic to start from (a reward model or a causal "
                      "LM folder); set ppo.critic_model, or use ppo.advantage_estimator=rloo (no critic)");
  }
  LlamaForScore critic{nullptr};
  LlamaConfig critic_shape;
  if (gae) {
    critic = score_model_from_pretrained(critic_folder, dtype, c10::kCPU, /*from_causal_lm=*/true,
                                         static_cast<uint64_t>(config.train.seed));
    critic->train();
    critic_shape = critic->config();
    critic_shape.torch_dtype = torch_dtype_name(dtype);
    prepare_lora(*critic, *critic->model, config);
    if (lora) critic->score->weight.set_requires_grad(true);
    check_tokenizer_fits(tokenizer, critic_shape);
  }
  auto engine = make_run_engine(config, loaded.shape, device, std::cout, 1 + frozen.count() + (critic ? 1 : 0));
  const RolloutModels models = register_rl_models(*engine, *policy, frozen, critic ? critic.get() : nullptr, device);
  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  const ExperienceOptions options = rollout_options(config, loaded.shape, tokenizer, chat_template, pad_id);
  const RolloutSettings rollout_settings{p.num_generations, config.train.seed, pad_id, rows_setting};
  ExperienceMaker maker(*engine, models, options, tokenizer);
  HeldOutEvaluation evaluation(config, *engine, models, options, tokenizer, chat_template, "train-ppo");

  std::cout << "train-ppo: " << prompts.size() << " prompts from " << d.prompt_file << ", " << evaluation.prompts()
            << " eval prompts; policy " << loaded.shape.num_parameters() << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "; rewards: " << rewards.describe() << "; advantages: "
            << enum_name(p.advantage_estimator) << (gae ? " with a critic from " + critic_folder : std::string())
            << "; reference: "
            << (!uses_kl ? "none (no KL penalty)" : lora ? "the policy with its LoRA adapters off" : "a frozen copy of model.path")
            << "\n";

  std::unique_ptr<SftBatchSource> ptx;
  if (p.ptx_coef > 0) {
    if (d.train_file.empty()) throw ConfigError("ppo.ptx_coef: the pretraining mix needs SFT data in data.train_file");
    SftDataset sft = load_sft_dataset(d.train_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines);
    SftBatchSource::Options o;
    o.micro_batch_size = config.train.micro_batch_size;
    o.pad_id = pad_id;
    o.seed = static_cast<uint64_t>(config.train.seed);
    o.shuffle = d.shuffle;
    o.max_length = d.max_length;
    ptx = std::make_unique<SftBatchSource>(std::move(sft.samples), std::vector<TokenizedSample>{}, o);
  }
  PpoLearner learner(config, *engine, models, ptx.get());

  const int64_t per_pass = (static_cast<int64_t>(prompts.size()) + p.rollout_batch_size - 1) / p.rollout_batch_size;
  const int64_t total = config.train.max_steps > 0 ? config.train.max_steps : p.num_episodes * per_pass;
  const int64_t total_steps = total * learner.steps_per_rollout(p.rollout_batch_size * p.num_generations);
  std::vector<RlTrainedModel> trained{
      {stage_trained_model(models.policy_name, *policy, loaded.shape, config, tokenizer), "policy"}};
  if (critic) {
    trained.push_back({stage_trained_model(models.critic_name, *critic, critic_shape, config, tokenizer), "critic"});
  }
  rl::KlController kl(p.kl_coef, p.kl_target, p.kl_horizon);
  int64_t step = 0;
  RlRun run(config, *engine, "train-ppo", std::move(trained), [&](PpoState& state) {
    state.kl_coef = kl.value();
    state.optimizer_steps = step;
    if (ptx) state.ptx_cursor = ptx->cursor();
  });
  PpoState& state = run.state;
  if (run.resume(total)) {
    kl.set_value(state.kl_coef);
    if (ptx) ptx->restore(state.ptx_cursor);
  } else {
    state.first_eval = evaluation.run("before training");
  }
  EpochSampler sampler(prompts.size(), static_cast<uint64_t>(config.train.seed), d.shuffle, run.prompt_cursor);
  step = state.optimizer_steps;

  std::cout << "train-ppo: " << total << " rollouts of " << p.rollout_batch_size << " prompts"
            << (p.num_generations > 1 ? " x " + std::to_string(p.num_generations) + " responses" : std::string())
            << ", " << p.ppo_epochs
            << " epoch(s) in minibatches of " << learner.minibatch_rows()
            << " (" << total_steps << " optimizer steps)\n"
            << engine->memory_report().summary();
  run.start();
  PhasePeaks& peaks = run.peaks;
  while (run.rollout < total) {
    const double started = monotonic_seconds();
    const std::vector<int64_t> indices = sampler.next(static_cast<size_t>(p.rollout_batch_size));
    Rollout made = make_rollout(maker, rewards, prompts, indices, run.rollout, rollout_settings, comm);
    Experience& experience = made.experience;
    const LoadedPrompts& batch_prompts = made.prompts;
    const ExperienceTimings& timings = made.timings;
    const MetricValues& reward_means = made.reward_means;
    at::Generator generator = learning_generator(config.train.seed, run.rollout);
    peaks.add(timings);
    const int64_t sampled = experience.rows();
    const Experience as_sampled = experience;  // the figures count every sampled response
    // On verifiable prompts (gt_answer): how many sampled answers are right, and the reward of
    // right and wrong ones — whether the reward points where exact match does.
    const MetricValues judged = judge_responses(experience, batch_prompts, chat_template.assistant_suffix);
    const int64_t dropped = drop_nonfinite_rows(experience);
    run.dropped_rows += dropped;
    if (dropped > 0) {
      std::cout << "warning: rollout " << run.rollout + 1 << ": " << dropped << " of " << sampled
                << " responses had a non-finite score, value or log-prob and were left out\n";
    }
    MetricValues values;
    double learn_seconds = 0;
    if (experience.rows() > 0) {
      experience.scores = shape_scores(experience.raw_scores, experience.ended, p, state.moments);
      const torch::Tensor token_kl = estimate_advantages(experience, p, kl.value());
      const double mean_kl = token_kl.sum(1).mean().item<double>();
      engine->reset_memory_peaks();
      const double learn_started = monotonic_seconds();
      const LearnStats learned = learner.learn(experience, step, total_steps, generator);
      learn_seconds = monotonic_seconds() - learn_started;
      peaks.learn = std::max(peaks.learn, engine->accountant().peak(offload::MemoryTier::device));
      run.skipped_steps += learned.skipped_steps;
      const double rollout_kl_coef = kl.value();
      kl.update(mean_kl, experience.rows());
      const torch::Tensor raw = experience.raw_scores.to(torch::kDouble);
      values = {{"loss", learned.policy_loss + (gae ? p.vf_coef * learned.value_loss : 0.0)},
                {"reward/mean", raw.mean().item<double>()},
                {"reward/std", experience.rows() > 1 ? raw.std().item<double>() : 0.0},
                {"score/mean", experience.scores.mean().item<double>()},
                {"kl", mean_kl},
                {"kl_coef", rollout_kl_coef}};
      const MetricValues learned_values = learned.metrics();
      values.insert(values.end(), learned_values.begin(), learned_values.end());
      values.push_back({"tokens_per_s/learn", static_cast<double>(learned.tokens) / std::max(learn_seconds, 1e-9)});
    } else {
      std::cout << "warning: rollout " << run.rollout + 1 << ": no response left to learn from; the models were not updated\n";
    }
    const double rollout_seconds = monotonic_seconds() - started;
    values.insert(values.end(), reward_means.begin(), reward_means.end());
    values.insert(values.end(), judged.begin(), judged.end());
    const MetricValues figures = rollout_figures(as_sampled, timings, learn_seconds, rollout_seconds);
    values.insert(values.end(), figures.begin(), figures.end());
    run.end_rollout(values, sampler.cursor());
  }
  run.end(sampler.cursor());
  const nlohmann::json last_eval = evaluation.run("after training");

  run.finish(last_eval, step, nlohmann::json{{"kl_coef", kl.value()}});
}

}  // namespace ferry
