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
#include "src/core/file_util.h"
#include "src/data/epoch_order.h"
#include "src/data/sft_dataset.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/sampling.h"
#include "src/metrics/metrics_logger.h"
#include "src/metrics/metrics_clock.h"
#include "src/model/pretrained.h"
#include "src/rl/rollout_advantages.h"
#include "src/rl/answer_match.h"
#include "src/rl/kl_controller.h"
#include "src/rl/masked_stats.h"
#include "src/rl/policy_losses.h"
#include "src/rl/prompt_eval.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/train/checkpoint_folders.h"
#include "src/train/device_choice.h"
#include "src/train/run_engine.h"
#include "src/train/stop_signal.h"
#include "src/train/trainer_state.h"
#include "stages/ppo_learner.h"
#include "stages/ppo_state.h"
#include "stages/sft.h"
#include "stages/stage_common.h"

namespace fs = std::filesystem;

namespace ferry {

namespace {

nlohmann::json evaluation_json(const PromptEvaluation& e) {
  nlohmann::json j{{"prompts", e.prompts}, {"with_answer", e.with_answer}, {"correct", e.correct},
                   {"accuracy", e.accuracy()}, {"mean_length", e.mean_length}};
  if (!std::isnan(e.mean_reward)) j["mean_reward"] = e.mean_reward;
  return j;
}

// A generator for rollout `rollout`'s sampling and shuffles: a pure function of the seed and the
// rollout, so a resumed run draws what an uninterrupted one would.
at::Generator rollout_generator(int64_t seed, int64_t rollout) {
  return make_sampling_generator(static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(rollout) + 1);
}

void freeze(torch::nn::Module& module) {
  for (auto& p : module.parameters()) p.set_requires_grad(false);
}

// Peak device bytes of each phase, as the engine counts them.
struct PhasePeaks {
  uint64_t generate = 0, score = 0, learn = 0;
};

}  // namespace

void run_ppo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const PpoConfig& p = config.ppo;
  if (config.train.precision == Precision::fp16) {
    throw ConfigError("train.precision: PPO runs in fp32 or bf16 (no fp16 loss scaling across two optimizers); "
                      "set train.precision=bf16");
  }
  if (p.reward_model.empty()) {
    throw ConfigError("ppo.reward_model: PPO needs a reward model folder (from `ferry train-rm`)");
  }
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const Tokenizer tokenizer(tokenizer_path(config));
  const ChatTemplate chat_template = load_chat_template(config.tokenizer.chat_template);
  LoadedCausalLm loaded = load_causal_lm(config, dtype);
  LlamaForCausalLM& policy = loaded.model;
  check_tokenizer_fits(tokenizer, loaded.shape);

  const DataConfig& d = config.data;
  const PromptFileOptions prompt_options{d.max_length, d.skip_bad_lines, d.max_samples};
  const std::vector<RolloutPrompt> prompts = load_prompt_file(d.prompt_file, tokenizer, chat_template, prompt_options, std::cout);
  std::vector<RolloutPrompt> eval_prompts;
  if (!d.eval_file.empty()) {
    eval_prompts = load_prompt_file(d.eval_file, tokenizer, chat_template, {d.max_length, d.skip_bad_lines, 0}, std::cout);
  }

  const bool lora = config.lora.rank > 0;
  const bool uses_kl = p.kl_coef > 0 || p.kl_target > 0;
  prepare_lora(*policy, config);
  LlamaForCausalLM reference{nullptr};
  if (uses_kl && !lora) {
    if (config.model.path.empty()) {
      throw ConfigError("model.path: the KL penalty needs the starting policy as a reference; start from a model "
                        "folder, or set ppo.kl_coef=0");
    }
    reference = causal_lm_from_pretrained(config.model.path, dtype, c10::kCPU);
    freeze(*reference);
  }
  const std::string critic_folder = p.critic_model.empty() ? p.reward_model : p.critic_model;
  LlamaForScore critic = score_model_from_pretrained(critic_folder, dtype, c10::kCPU, /*from_causal_lm=*/true,
                                                     static_cast<uint64_t>(config.train.seed));
  critic->train();
  LlamaConfig critic_shape = critic->config();
  critic_shape.torch_dtype = torch_dtype_name(dtype);
  prepare_lora(*critic, *critic->model, config);
  if (lora) critic->score->weight.set_requires_grad(true);
  LlamaForScore reward = score_model_from_pretrained(p.reward_model, dtype, c10::kCPU, /*from_causal_lm=*/false);
  freeze(*reward);
  check_tokenizer_fits(tokenizer, critic_shape);
  check_tokenizer_fits(tokenizer, reward->config());

  const int64_t model_count = reference ? 4 : 3;
  auto engine = make_run_engine(config, loaded.shape, device, std::cout, model_count);
  RolloutModels models;
  models.policy = policy.get();
  models.critic = critic.get();
  models.reward = reward.get();
  engine->add_model(models.policy_name, group_parameters(*policy, false), /*trainable=*/true);
  if (reference) {
    engine->add_model(models.reference_name, group_parameters(*reference, false), /*trainable=*/false);
    models.reference = reference.get();
  }
  models.reference_is_policy_without_lora = uses_kl && lora;
  engine->add_model(models.critic_name, group_parameters(*critic, false), /*trainable=*/true);
  engine->add_model(models.reward_name, group_parameters(*reward, false), /*trainable=*/false);
  for (torch::nn::Module* m : std::initializer_list<torch::nn::Module*>{policy.get(), critic.get(), reward.get()}) m->to(device);
  if (reference) reference->to(device);

  std::cout << "train-ppo: " << prompts.size() << " prompts from " << d.prompt_file << ", " << eval_prompts.size()
            << " eval prompts; policy " << loaded.shape.num_parameters() << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "; critic from " << critic_folder << "; reward model "
            << p.reward_model << "; reference: "
            << (!uses_kl ? "none (no KL penalty)" : lora ? "the policy with its LoRA adapters off" : "a frozen copy of model.path")
            << "\n";

  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  ExperienceOptions rollout_options;
  rollout_options.generate = chat_generate_options(loaded.shape, tokenizer, chat_template);
  rollout_options.generate.max_new_tokens = config.generation.max_new_tokens;
  rollout_options.generate.sampling = {config.generation.greedy, config.generation.temperature, config.generation.top_k,
                                       config.generation.top_p};
  rollout_options.generate.stop_strings.insert(rollout_options.generate.stop_strings.end(),
                                               config.generation.stop_strings.begin(), config.generation.stop_strings.end());
  check_sampling_options(rollout_options.generate.sampling);
  rollout_options.micro_batch_size = 2 * config.train.micro_batch_size;  // no gradients: no activations kept
  rollout_options.pad_id = pad_id;
  ExperienceMaker maker(*engine, models, rollout_options, tokenizer);

  ExperienceOptions eval_options = rollout_options;
  eval_options.generate.sampling.greedy = true;
  eval_options.policy_logprobs = false;
  RolloutModels eval_models;
  eval_models.policy = policy.get();
  eval_models.reward = reward.get();
  ExperienceMaker eval_maker(*engine, eval_models, eval_options, tokenizer);
  auto evaluate = [&](const char* when) -> nlohmann::json {
    if (eval_prompts.empty()) return nullptr;
    const double started = monotonic_seconds();
    const PromptEvaluation e = evaluate_prompts(eval_maker, eval_prompts, std::max<int64_t>(config.train.micro_batch_size, 32),
                                                chat_template.assistant_suffix);
    std::cout << "train-ppo: " << when << ": " << d.eval_file << ": " << e.summary() << " ("
              << monotonic_seconds() - started << " s)\n";
    return evaluation_json(e);
  };

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
  const int64_t total_steps = total * learner.steps_per_rollout(p.rollout_batch_size);
  const fs::path output(config.output.dir);
  TrainedModel policy_io = stage_trained_model(models.policy_name, *policy, loaded.shape, config, tokenizer.path());
  TrainedModel critic_io = stage_trained_model(models.critic_name, *critic, critic_shape, config, tokenizer.path());

  rl::KlController kl(p.kl_coef, p.kl_target, p.kl_horizon);
  PpoState state;
  int64_t rollout = 0;
  DataCursor cursor;
  std::optional<int64_t> resume_step;
  if (const auto resume = resolve_resume(output, config.train.resume)) {
    const TrainerState trainer = load_trainer_state(*resume);
    state = load_ppo_state(*resume);
    engine->with_weights(models.policy_name, ParameterEngine::WeightAccess::write, [&] { policy_io.load(*resume / "policy"); });
    engine->with_weights(models.critic_name, ParameterEngine::WeightAccess::write, [&] { critic_io.load(*resume / "critic"); });
    engine->load_state(*resume);
    restore_rng_state(*resume);
    rollout = trainer.step;
    cursor = trainer.cursor;
    kl.set_value(state.kl_coef);
    if (ptx) ptx->restore(state.ptx_cursor);
    resume_step = rollout;
    std::cout << "resumed from " << resume->string() << " at rollout " << rollout << " of " << total << "\n";
  } else {
    state.first_eval = evaluate("before training");
  }
  EpochSampler sampler(prompts.size(), static_cast<uint64_t>(config.train.seed), d.shuffle, cursor);
  int64_t step = state.optimizer_steps;

  auto save_checkpoint = [&] {
    TrainerState trainer;
    trainer.step = rollout;
    trainer.total_steps = total;
    trainer.cursor = sampler.cursor();
    trainer.seed = config.train.seed;
    state.kl_coef = kl.value();
    state.optimizer_steps = step;
    if (ptx) state.ptx_cursor = ptx->cursor();
    write_folder_atomic(checkpoint_folder(output, rollout), [&](const fs::path& folder) {
      engine->with_weights(models.policy_name, ParameterEngine::WeightAccess::read, [&] { policy_io.save(folder / "policy"); });
      engine->with_weights(models.critic_name, ParameterEngine::WeightAccess::read, [&] { critic_io.save(folder / "critic"); });
      engine->save_state(folder);
      save_trainer_state(folder, trainer);
      save_ppo_state(folder, state);
    });
    prune_checkpoints(output, config.output.keep_last);
  };

  std::cout << "train-ppo: " << total << " rollouts of " << p.rollout_batch_size << " prompts, " << p.ppo_epochs
            << " epoch(s) in minibatches of " << config.train.micro_batch_size * config.train.grad_accumulation
            << " (" << total_steps << " optimizer steps)\n"
            << engine->memory_report().summary();
  MetricsLoggerOptions metrics_options;
  metrics_options.total_steps = total;
  metrics_options.resume_step = resume_step;
  MetricsLogger metrics(config.logging, output, metrics_options);
  StopSignal stop;
  PhasePeaks peaks;
  int64_t dropped_total = 0, skipped_total = 0, last_save = -1;
  while (rollout < total) {
    const double started = monotonic_seconds();
    const std::vector<int64_t> indices = sampler.next(static_cast<size_t>(p.rollout_batch_size));
    std::vector<const RolloutPrompt*> batch;
    for (int64_t i : indices) batch.push_back(&prompts[static_cast<size_t>(i)]);
    at::Generator generator = rollout_generator(config.train.seed, rollout);

    ExperienceTimings timings;
    Experience experience = maker.make(batch, indices, generator, &timings);
    peaks.generate = std::max(peaks.generate, timings.generate_peak_bytes);
    peaks.score = std::max(peaks.score, timings.score_peak_bytes);
    const int64_t sampled = experience.rows();
    const double ended_fraction = experience.ended.to(torch::kFloat).mean().item<double>();
    const double mean_length = experience.response_mask.sum(1).mean().item<double>();
    // On verifiable prompts (gt_answer): how many sampled answers are right, and what the reward
    // model gives right and wrong ones — whether its scores point where exact match does.
    MetricValues judged;
    {
      double right = 0, judged_rows = 0, right_reward = 0, wrong_reward = 0;
      for (int64_t row = 0; row < sampled; ++row) {
        const RolloutPrompt& prompt = prompts[static_cast<size_t>(experience.prompt_index[static_cast<size_t>(row)])];
        if (prompt.gt_answer.empty()) continue;
        const bool ok = exact_match(experience.responses[static_cast<size_t>(row)], prompt.gt_answer,
                                    chat_template.assistant_suffix);
        const double r = experience.raw_scores[row].item<double>();
        judged_rows += 1;
        right += ok ? 1 : 0;
        (ok ? right_reward : wrong_reward) += r;
      }
      if (judged_rows > 0) {
        judged.push_back({"exact_match", right / judged_rows});
        if (right > 0) judged.push_back({"reward/right", right_reward / right});
        if (right < judged_rows) judged.push_back({"reward/wrong", wrong_reward / (judged_rows - right)});
      }
    }
    const int64_t dropped = drop_nonfinite_rows(experience);
    dropped_total += dropped;
    if (dropped > 0) {
      std::cout << "warning: rollout " << rollout + 1 << ": " << dropped << " of " << sampled
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
      skipped_total += learned.skipped_steps;
      const double rollout_kl_coef = kl.value();
      kl.update(mean_kl, experience.rows());
      const torch::Tensor raw = experience.raw_scores.to(torch::kDouble);
      values = {{"loss", learned.policy_loss + p.vf_coef * learned.value_loss},
                {"reward/mean", raw.mean().item<double>()},
                {"reward/std", experience.rows() > 1 ? raw.std().item<double>() : 0.0},
                {"score/mean", experience.scores.mean().item<double>()},
                {"kl", mean_kl},
                {"kl_coef", rollout_kl_coef}};
      const MetricValues learned_values = learned.metrics();
      values.insert(values.end(), learned_values.begin(), learned_values.end());
      values.push_back({"tokens_per_s/learn", static_cast<double>(learned.tokens) / std::max(learn_seconds, 1e-9)});
    } else {
      std::cout << "warning: rollout " << rollout + 1 << ": no response left to learn from; the models were not updated\n";
    }
    const double rollout_seconds = monotonic_seconds() - started;
    values.insert(values.end(), judged.begin(), judged.end());
    values.push_back({"response_length", mean_length});
    values.push_back({"ended_fraction", ended_fraction});
    values.push_back({"time/generate", timings.generate_seconds});
    values.push_back({"time/score", timings.score_seconds});
    values.push_back({"time/learn", learn_seconds});
    values.push_back({"time/rollout", rollout_seconds});
    values.push_back({"tokens_per_s/generate", static_cast<double>(timings.generated_tokens) /
                                                   std::max(timings.generate_seconds, 1e-9)});
    values.push_back({"tokens_per_s/score", static_cast<double>(timings.scored_tokens) /
                                                std::max(timings.score_seconds, 1e-9)});
    if (dropped_total > 0) values.push_back({"dropped_responses", static_cast<double>(dropped_total)});
    ++rollout;
    metrics.log_train(rollout, values);
    const bool stopping = stop.requested();
    if ((config.train.save_every > 0 && rollout % config.train.save_every == 0) || rollout == total || stopping) {
      save_checkpoint();
      last_save = rollout;
    }
    if (stopping) {
      metrics.close();
      throw Interrupted(stop.signal_number(),
                        detail::concat("train-ppo: interrupted after rollout ", rollout, "; checkpoint ",
                                       checkpoint_folder(output, rollout).string(),
                                       " saved; resume with --set train.resume=auto"));
    }
  }
  if (last_save != rollout && rollout > 0) save_checkpoint();
  metrics.close();
  const nlohmann::json last_eval = evaluate("after training");

  const fs::path final_dir = output / "final";
  write_folder_atomic(final_dir, [&](const fs::path& folder) {
    engine->with_weights(models.policy_name, ParameterEngine::WeightAccess::read, [&] { policy_io.save(folder); });
  });
  export_lora_final(final_dir, config);
  write_folder_atomic(output / "final_critic", [&](const fs::path& folder) {
    engine->with_weights(models.critic_name, ParameterEngine::WeightAccess::read, [&] { critic_io.save(folder); });
  });
  std::cout << "final model: " << final_dir.string() << " (critic: " << (output / "final_critic").string() << ")\n";
  std::cout << "train-ppo: engine peak device bytes per phase (weights, gradients, optimizer state): generation "
            << format_bytes_approx(peaks.generate) << " (" << peaks.generate << " bytes), scoring "
            << format_bytes_approx(peaks.score) << " (" << peaks.score << " bytes), learning "
            << format_bytes_approx(peaks.learn) << " (" << peaks.learn << " bytes)";
  if (config.offload.gpu_memory.bytes > 0) std::cout << "; budget " << config.offload.gpu_memory.bytes << " bytes";
  std::cout << "\n";
  if (dropped_total > 0 || skipped_total > 0) {
    std::cout << "train-ppo: " << dropped_total << " responses left out (non-finite), " << skipped_total
              << " optimizer steps skipped (non-finite gradients)\n";
  }
  nlohmann::json figures{{"rollouts", rollout},
                         {"optimizer_steps", step},
                         {"dropped_responses", dropped_total},
                         {"skipped_steps", skipped_total},
                         {"kl_coef", kl.value()},
                         {"peak_device_bytes", {{"generate", peaks.generate}, {"score", peaks.score}, {"learn", peaks.learn}}}};
  if (!state.first_eval.is_null()) figures["eval_before"] = state.first_eval;
  if (!last_eval.is_null()) figures["eval_after"] = last_eval;
  write_stage_result(config, figures.dump());
}

}  // namespace ferry
