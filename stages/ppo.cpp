// `ferry train-ppo`: models, the rollout loop, metrics and checkpoints (see ppo.h). The rollout
// itself is train/rl's experience maker; the update is ppo_learner.h.
#include "stages/ppo.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <memory>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/accountant.h"
#include "src/data/epoch_order.h"
#include "src/data/sft_dataset.h"
#include "src/dist/communicator.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/sampling.h"
#include "src/metrics/metrics_clock.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/model_setup.h"
#include "train/rl/answer_match.h"
#include "train/rl/experience_gatherer.h"
#include "train/rl/kl_controller.h"
#include "train/rl/masked_stats.h"
#include "train/rl/policy_losses.h"
#include "train/rl/ppo_learner.h"
#include "train/rl/prompt_eval.h"
#include "train/rl/rewards.h"
#include "train/rl/rl_run_lifecycle.h"
#include "train/rl/rl_run_state.h"
#include "train/rl/rl_start.h"
#include "train/rl/rollout_environment.h"
#include "train/rl/rollout_advantages.h"
#include "train/rl/rollout_judging.h"
#include "train/rl/rollout_loop.h"
#include "train/run_engine.h"
#include "train/sft_batches.h"
#include "src/model/family/model_tensors.h"

namespace fs = std::filesystem;

namespace ferry {

namespace {

// PPO's own parts of a rollout: shaped scores, the KL penalty and the advantages (GAE with a
// critic, or RLOO / REINFORCE++-baseline), the learner's epochs, and the adaptive KL coefficient.
class PpoRollouts : public rl::RlAlgorithm {
 public:
  PpoRollouts(const PpoConfig& settings, rl::PpoLearner& learner, rl::KlController& kl, rl::RlRunState& state, int64_t& step,
              int64_t total_steps)
      : p_(settings), learner_(learner), kl_(kl), state_(state), step_(step), total_steps_(total_steps) {}

  void before_learn(rl::Experience& experience) override {
    experience.scores = rl::shape_scores(experience.raw_scores, experience.ended, p_, state_.moments);
    const torch::Tensor token_kl = rl::estimate_advantages(experience, p_, kl_.value());
    mean_kl_ = token_kl.sum(1).mean().item<double>();
  }

  rl::LearnedRollout learn(rl::Experience& experience, at::Generator& generator) override {
    const rl::LearnStats learned = learner_.learn(experience, step_, total_steps_, generator);
    const double rollout_kl_coef = kl_.value();
    kl_.update(mean_kl_, experience.rows());
    const bool gae = p_.advantage_estimator == AdvantageEstimator::gae;
    const torch::Tensor raw = experience.raw_scores.to(torch::kDouble);
    rl::LearnedRollout out;
    out.values = {{"loss", learned.policy_loss + (gae ? p_.vf_coef * learned.value_loss : 0.0)},
                  {"reward/mean", raw.mean().item<double>()},
                  {"reward/std", experience.rows() > 1 ? raw.std().item<double>() : 0.0},
                  {"score/mean", experience.scores.mean().item<double>()},
                  {"kl", mean_kl_},
                  {"kl_coef", rollout_kl_coef}};
    const MetricValues learned_values = learned.metrics();
    out.values.insert(out.values.end(), learned_values.begin(), learned_values.end());
    out.skipped_steps = learned.skipped_steps;
    out.tokens = learned.tokens;
    return out;
  }

  MetricValues values(const rl::Rollout& rollout, const rl::Experience&, const MetricValues* learned) override {
    MetricValues values = learned != nullptr ? *learned : MetricValues{};
    values.insert(values.end(), rollout.reward_means.begin(), rollout.reward_means.end());
    return values;
  }

  const char* row_name() const override { return "response"; }
  const char* nonfinite_what() const override { return "score, value or log-prob"; }
  const char* not_updated() const override { return "the models were not updated"; }

 private:
  const PpoConfig& p_;
  rl::PpoLearner& learner_;
  rl::KlController& kl_;
  rl::RlRunState& state_;
  int64_t& step_;
  int64_t total_steps_;
  double mean_kl_ = 0;
};

}  // namespace

void run_ppo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const PpoConfig& p = config.ppo;
  const char* const rows_setting = "ppo.rollout_batch_size x ppo.num_generations";
  dist::Communicator* comm = dist::process_communicator(config.distributed);
  (void)rl::rollout_share(p.rollout_batch_size * p.num_generations, comm, rows_setting);  // before loading anything
  rl::RlStart start(config, "PPO", rl::ppo_rewards(config));
  const c10::Device device = start.device;
  const at::ScalarType dtype = start.dtype;
  const Tokenizer& tokenizer = start.tokenizer;
  const ChatTemplate& chat_template = start.chat_template;
  const LoadedCausalLm& loaded = start.loaded;
  CausalLM& policy = start.loaded.model;
  const rl::PromptFile& prompts = start.prompts;
  rl::RewardMix& rewards = *start.rewards;
  const DataConfig& d = config.data;
  const bool lora = config.lora.rank > 0;
  const bool uses_kl = p.kl_coef > 0 || p.kl_target > 0;
  rl::FrozenRlModels frozen = rl::load_frozen_models(config, dtype, tokenizer, uses_kl, "ppo.kl_coef", rewards.model_path());
  const bool gae = p.advantage_estimator == AdvantageEstimator::gae;
  const std::string reward_folder = rewards.model_path();
  const std::string critic_folder =
      !gae ? "" : !p.critic_model.empty() ? p.critic_model : !p.reward_model.empty() ? p.reward_model : reward_folder;
  if (gae && critic_folder.empty()) {
    throw ConfigError("ppo.critic_model: advantages from GAE need a critic to start from (a reward model or a causal "
                      "LM folder); set ppo.critic_model, or use ppo.advantage_estimator=rloo (no critic)");
  }
  ScoreModel critic{nullptr};
  ModelShape critic_shape;
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
  const rl::RolloutModels models = rl::register_rl_models(*engine, *policy, frozen, critic ? critic.get() : nullptr, device);
  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  const rl::ExperienceOptions options = rl::rollout_options(config, loaded.shape, tokenizer, chat_template, pad_id);
  const rl::RolloutSettings rollout_settings{p.num_generations, config.train.seed, pad_id, rows_setting};
  rl::ExperienceMaker maker(*engine, models, options, tokenizer);
  rl::HeldOutEvaluation evaluation(config, *engine, models, options, tokenizer, chat_template, "train-ppo");
  const std::unique_ptr<rl::RolloutEnvironment> environment =
      rl::make_rollout_environment(config, tokenizer, chat_template, std::cout);
  rl::use_episodes(environment.get(), maker, evaluation);

  std::cout << "train-ppo: " << prompts.size() << " prompts from " << d.prompt_file << ", " << evaluation.prompts()
            << " eval prompts; policy " << parameter_count(loaded.shape) << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "; rewards: " << rewards.describe() << "; advantages: "
            << enum_name(p.advantage_estimator) << (gae ? " with a critic from " + critic_folder : std::string())
            << "; reference: "
            << (!uses_kl ? "none (no KL penalty)" : lora ? "the policy with its LoRA adapters off" : "a frozen copy of model.path")
            << "\n";

  std::unique_ptr<SftBatchSource> ptx;
  if (p.ptx_coef > 0) {
    if (d.train_file.empty()) throw ConfigError("ppo.ptx_coef: the pretraining mix needs SFT data in data.train_file");
    SftDataset sft = load_sft_dataset(d.train_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, 0,
                                       RowFormat::from_config(d));
    ptx = std::make_unique<SftBatchSource>(std::move(sft.samples), std::vector<TokenizedSample>{},
                                           SftBatchSource::Options::from_config(config, pad_id));
  }
  rl::PpoLearner learner(config, *engine, models, ptx.get());

  const int64_t per_pass = (static_cast<int64_t>(prompts.size()) + p.rollout_batch_size - 1) / p.rollout_batch_size;
  const int64_t total = config.train.max_steps > 0 ? config.train.max_steps : p.num_episodes * per_pass;
  const int64_t total_steps = total * learner.steps_per_rollout(p.rollout_batch_size * p.num_generations);
  std::vector<CheckpointedModel> trained{
      {stage_trained_model(models.policy_name, *policy, loaded.shape, config, tokenizer), "policy"}};
  if (critic) {
    trained.push_back({stage_trained_model(models.critic_name, *critic, critic_shape, config, tokenizer), "critic"});
  }
  rl::KlController kl(p.kl_coef, p.kl_target, p.kl_horizon);
  int64_t step = 0;
  rl::RlRunLifecycle run(config, *engine, "train-ppo", std::move(trained), [&](rl::RlRunState& state) {
    state.kl_coef = kl.value();
    state.optimizer_steps = step;
    if (ptx) state.ptx_cursor = ptx->cursor();
  });
  rl::RlRunState& state = run.state;
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
  PpoRollouts algorithm(p, learner, kl, state, step, total_steps);
  rl::run_rollout_loop(run, total,
                   {maker, rewards, prompts, sampler, p.rollout_batch_size, rollout_settings, *engine,
                    chat_template.assistant_suffix},
                   algorithm);
  const nlohmann::json last_eval = evaluation.run("after training");

  run.finish(last_eval, step, nlohmann::json{{"kl_coef", kl.value()}});
}

}  // namespace ferry
