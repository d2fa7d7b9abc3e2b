// `ferry train-grpo`: models, the rollout loop, metrics and checkpoints (see grpo.h).
#include "stages/grpo.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <iostream>
#include <optional>

#include "core/error.h"
#include "offload/accountant.h"
#include "src/data/epoch_order.h"
#include "src/dist/communicator.h"
#include "src/metrics/metrics_clock.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/model_setup.h"
#include "train/rl/experience_gatherer.h"
#include "train/rl/group_advantages.h"
#include "train/rl/grpo_learner.h"
#include "train/rl/rewards.h"
#include "train/rl/rl_run_lifecycle.h"
#include "train/rl/rl_run_state.h"
#include "train/rl/rl_start.h"
#include "train/rl/rollout_environment.h"
#include "train/rl/rollout_judging.h"
#include "train/rl/rollout_loop.h"
#include "train/run_engine.h"
#include "src/model/family/model_tensors.h"

namespace fs = std::filesystem;

namespace ferry {

namespace {

// GRPO's own parts of a rollout: advantages within each prompt's group (over every sampled
// completion, before any is left out, as TRL's nan-skipping statistics), truncated completions
// masked out when asked, and the learner's passes.
class GrpoRollouts : public rl::RlAlgorithm {
 public:
  GrpoRollouts(const GrpoConfig& settings, rl::GrpoLearner& learner, int64_t& step, int64_t total_steps)
      : g_(settings), learner_(learner), step_(step), total_steps_(total_steps) {}

  void before_drop(rl::Experience& experience) override {
    const torch::Tensor groups = rl::consecutive_groups(experience.rows(), g_.num_generations);
    const torch::Tensor advantages = rl::group_advantages(experience.raw_scores, groups, g_.scale_rewards);
    experience.scores = experience.raw_scores;
    experience.advantages = advantages.unsqueeze(1).expand({experience.rows(), experience.response_length()}).contiguous();
    zero_std_groups_ =  // groups whose rewards were all equal: advantage 0 throughout
        (advantages.view({-1, g_.num_generations}).abs().amax(1) == 0).to(torch::kFloat).mean().item<double>();
    if (g_.mask_truncated_completions) {
      experience.response_mask = experience.response_mask * experience.ended.to(torch::kFloat).unsqueeze(1);
    }
  }

  rl::LearnedRollout learn(rl::Experience& experience, at::Generator& generator) override {
    const rl::GrpoLearnStats learned = learner_.learn(experience, step_, total_steps_, generator);
    loss_ = learned.loss;
    rl::LearnedRollout out;
    out.values = learned.metrics();
    out.skipped_steps = learned.skipped_steps;
    out.tokens = learned.tokens;
    return out;
  }

  MetricValues values(const rl::Rollout& rollout, const rl::Experience& as_sampled, const MetricValues* learned) override {
    const torch::Tensor raw = as_sampled.raw_scores.to(torch::kDouble);
    MetricValues values;
    if (learned != nullptr) values.push_back({"loss", loss_});
    values.push_back({"reward/mean", torch::nanmean(raw).item<double>()});
    values.push_back({"reward/std", as_sampled.rows() > 1 ? raw.std().item<double>() : 0.0});
    values.insert(values.end(), rollout.reward_means.begin(), rollout.reward_means.end());
    values.push_back({"frac_reward_zero_std", zero_std_groups_});
    if (learned != nullptr) values.insert(values.end(), learned->begin(), learned->end());
    return values;
  }

  const char* row_name() const override { return "completion"; }
  const char* nonfinite_what() const override { return "reward or log-prob"; }
  const char* not_updated() const override { return "the policy was not updated"; }

 private:
  const GrpoConfig& g_;
  rl::GrpoLearner& learner_;
  int64_t& step_;
  int64_t total_steps_;
  double zero_std_groups_ = 0, loss_ = 0;
};

}  // namespace

void run_grpo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const GrpoConfig& g = config.grpo;
  const std::vector<RewardConfig> reward_list = rl::grpo_rewards(config);  // before loading anything
  const char* const rows_setting = "grpo.generation_batch_size";
  dist::Communicator* comm = dist::process_communicator(config.distributed);
  (void)rl::rollout_share(g.generation_batch_size, comm, rows_setting);  // before loading anything
  rl::RlStart start(config, "GRPO", reward_list);
  const c10::Device device = start.device;
  const Tokenizer& tokenizer = start.tokenizer;
  const ChatTemplate& chat_template = start.chat_template;
  const LoadedCausalLm& loaded = start.loaded;
  CausalLM& policy = start.loaded.model;
  const rl::PromptFile& prompts = start.prompts;
  rl::RewardMix& rewards = *start.rewards;
  const DataConfig& d = config.data;
  const bool lora = config.lora.rank > 0;
  const bool uses_kl = g.beta > 0;
  rl::FrozenRlModels frozen = rl::load_frozen_models(config, start.dtype, tokenizer, uses_kl, "grpo.beta", rewards.model_path());
  auto engine = make_run_engine(config, loaded.shape, device, std::cout, 1 + frozen.count());
  const rl::RolloutModels models = rl::register_rl_models(*engine, *policy, frozen, nullptr, device);
  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  rl::ExperienceOptions options = rl::rollout_options(config, loaded.shape, tokenizer, chat_template, pad_id);
  const rl::RolloutSettings rollout_settings{g.num_generations, config.train.seed, pad_id, rows_setting};
  rl::HeldOutEvaluation evaluation(config, *engine, models, options, tokenizer, chat_template, "train-grpo");
  options.policy_logprobs = g.num_iterations > 1;  // else the learner's own forward gives the old log-probs
  rl::ExperienceMaker maker(*engine, models, options, tokenizer);
  rl::GrpoLearner learner(config, *engine, models);
  const std::unique_ptr<rl::RolloutEnvironment> environment =
      rl::make_rollout_environment(config, tokenizer, chat_template, std::cout);
  rl::use_episodes(environment.get(), maker, evaluation);

  std::cout << "train-grpo: " << prompts.size() << " prompts from " << d.prompt_file << ", " << evaluation.prompts()
            << " eval prompts; policy " << parameter_count(loaded.shape) << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "; rewards: " << rewards.describe() << "; reference: "
            << (!uses_kl ? "none (beta 0)" : lora ? "the policy with its LoRA adapters off" : "a frozen copy of model.path")
            << "\n";

  const int64_t prompts_per_rollout = g.generation_batch_size / g.num_generations;
  const int64_t per_pass = (static_cast<int64_t>(prompts.size()) + prompts_per_rollout - 1) / prompts_per_rollout;
  const int64_t total = config.train.max_steps > 0 ? config.train.max_steps : g.num_episodes * per_pass;
  const int64_t total_steps = total * learner.steps_per_rollout(g.generation_batch_size);
  int64_t step = 0;
  rl::RlRunLifecycle run(config, *engine, "train-grpo",
            {{stage_trained_model(models.policy_name, *policy, loaded.shape, config, tokenizer), "policy"}},
            [&](rl::RlRunState& state) { state.optimizer_steps = step; });
  rl::RlRunState& state = run.state;
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
  GrpoRollouts algorithm(g, learner, step, total_steps);
  rl::run_rollout_loop(run, total,
                   {maker, rewards, prompts, sampler, prompts_per_rollout, rollout_settings, *engine,
                    chat_template.assistant_suffix},
                   algorithm);
  const nlohmann::json last_eval = evaluation.run("after training");

  run.finish(last_eval, step, nullptr);
}

}  // namespace ferry
