// `ferry train-dpo` with dpo.online: models, the rollout loop and its figures (see online_dpo.h).
#include "stages/online_dpo.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <iostream>

#include "core/error.h"
#include "src/data/epoch_order.h"
#include "src/dist/communicator.h"
#include "src/dist/dist_env.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "train/model_setup.h"
#include "train/preference/reference_model.h"
#include "train/preference_losses.h"
#include "train/rl/experience_gatherer.h"
#include "train/rl/online_dpo_learner.h"
#include "train/rl/rewards.h"
#include "train/rl/rl_run_lifecycle.h"
#include "train/rl/rl_run_state.h"
#include "train/rl/rl_start.h"
#include "train/rl/rollout_judging.h"
#include "train/rl/rollout_loop.h"
#include "train/run_engine.h"
#include "src/model/family/model_tensors.h"

namespace ferry {
namespace {

// Online DPO's own parts of a rollout: the scores the answers are ranked by, pairs left out
// whole, and the learning phase.
class OnlineDpoRollouts : public rl::RlAlgorithm {
 public:
  OnlineDpoRollouts(const DpoConfig& settings, rl::OnlineDpoLearner& learner, int64_t& step, int64_t total_steps)
      : settings_(settings), learner_(learner), step_(step), total_steps_(total_steps) {}

  void before_drop(rl::Experience& experience) override {
    torch::Tensor scores = experience.raw_scores;
    if (settings_.missing_eos_penalty > 0) {
      scores = scores - settings_.missing_eos_penalty * experience.ended.logical_not().to(torch::kFloat);
    }
    // A pair with an answer that cannot be learned from is left out whole.
    const torch::Tensor mask = experience.response_mask.gt(0);
    const torch::Tensor finite = scores.isfinite() &
                                 experience.ref_logprobs.isfinite().logical_or(mask.logical_not()).all(1);
    const torch::Tensor pair_ok = finite.view({-1, 2}).all(1, /*keepdim=*/true).expand({-1, 2}).reshape({-1});
    experience.scores = torch::where(pair_ok, scores, torch::full_like(scores, NAN));
    const rl::RankedPairs ranked = rl::rank_pairs(scores.nan_to_num(0.0));
    const torch::Tensor ok = pair_ok.view({-1, 2}).select(1, 0).to(torch::kDouble);
    const double ok_pairs = std::max(ok.sum().item<double>(), 1.0);
    margin_ = ((scores.index_select(0, ranked.chosen) - scores.index_select(0, ranked.rejected)).to(torch::kDouble) * ok)
                  .nansum().item<double>() / ok_pairs;
    scores_mean_ = torch::nanmean(scores.to(torch::kDouble)).item<double>();
    contain_eos_ = experience.ended.to(torch::kDouble).mean().item<double>();
  }

  rl::LearnedRollout learn(rl::Experience& experience, at::Generator& /*generator*/) override {
    const rl::OnlineDpoStats learned = learner_.learn(experience, step_, total_steps_);
    loss_ = learned.loss;
    non_score_reward_ = find_metric(learned.values, "objective/non_score_reward").value_or(0.0);
    rl::LearnedRollout out;
    out.values = learned.values;
    out.skipped_steps = learned.skipped_steps;
    out.tokens = learned.tokens;
    return out;
  }

  MetricValues values(const rl::Rollout& rollout, const rl::Experience& as_sampled, const MetricValues* learned) override {
    MetricValues values;
    if (learned != nullptr) values.push_back({"loss", loss_});
    values.push_back({"reward/mean", torch::nanmean(as_sampled.raw_scores.to(torch::kDouble)).item<double>()});
    values.insert(values.end(), rollout.reward_means.begin(), rollout.reward_means.end());
    values.push_back({"objective/scores", scores_mean_});
    values.push_back({"objective/scores_margin", margin_});
    values.push_back({"val/contain_eos_token", contain_eos_});
    if (learned != nullptr) {
      values.push_back({"objective/rlhf_reward", scores_mean_ + non_score_reward_});
      values.insert(values.end(), learned->begin(), learned->end());
    }
    return values;
  }

  const char* row_name() const override { return "answer"; }
  const char* nonfinite_what() const override { return "reward or log-prob (its pair was left out)"; }
  const char* not_updated() const override { return "the policy was not updated"; }

 private:
  const DpoConfig& settings_;
  rl::OnlineDpoLearner& learner_;
  int64_t& step_;
  int64_t total_steps_;
  double loss_ = 0, margin_ = 0, scores_mean_ = 0, contain_eos_ = 0, non_score_reward_ = 0;
};

}  // namespace

void run_online_dpo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const DpoConfig& settings = config.dpo;
  if (!config.rollout.environment.empty()) {
    throw ConfigError("rollout.environment: online DPO samples single answers; multi-turn episodes run under "
                      "train-grpo or train-ppo");
  }
  if (config.distributed.mode == DistributedMode::diloco && dist::read_dist_env().distributed()) {
    throw ConfigError("distributed.mode: online DPO shares each step's answers between the processes; set "
                      "distributed.mode=sync");
  }
  const std::vector<RewardConfig> reward_list = rl::grpo_rewards(config, "online DPO");  // before loading anything
  const ReferenceSource source = resolve_reference_source(settings.reference, settings.reference_model,
                                                          /*needs_reference=*/true, config.lora.rank > 0, "dpo");
  const char* const rows_setting = "train.micro_batch_size x train.grad_accumulation";
  dist::Communicator* comm = dist::process_communicator(config.distributed);
  rl::RlStart start(config, "online DPO", reward_list);
  const c10::Device device = start.device;
  const Tokenizer& tokenizer = start.tokenizer;
  const ChatTemplate& chat_template = start.chat_template;
  const LoadedCausalLm& loaded = start.loaded;
  CausalLM& policy = start.loaded.model;
  const rl::PromptFile& prompts = start.prompts;
  rl::RewardMix& rewards = *start.rewards;
  // The reference: with LoRA (and no other folder) the policy with its adapters off; else a frozen
  // model (auto without LoRA, where DPO would precompute, takes a frozen copy of model.path).
  const bool lora_off = source == ReferenceSource::lora_off;
  const ReferenceSource held = lora_off ? source : ReferenceSource::model;
  const auto folder = reference_folder(held, config, settings.reference_model, "dpo");
  rl::FrozenRlModels frozen = rl::load_frozen_models(config, start.dtype, tokenizer, false, "", rewards.model_path());
  frozen.reference_is_policy_without_lora = lora_off;
  if (!lora_off) {
    frozen.reference = causal_lm_from_pretrained(folder, start.dtype, c10::kCPU);
    rl::freeze_parameters(*frozen.reference);
  }
  auto engine = make_run_engine(config, loaded.shape, device, std::cout, 1 + frozen.count());
  const rl::RolloutModels models = rl::register_rl_models(*engine, *policy, frozen, nullptr, device);
  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  rl::ExperienceOptions options = rl::rollout_options(config, loaded.shape, tokenizer, chat_template, pad_id);
  rl::HeldOutEvaluation evaluation(config, *engine, models, options, tokenizer, chat_template, "train-dpo");
  options.policy_logprobs = false;  // the learner's forward gives them, with gradients
  options.scoring_temperature = 1.0;  // TRL's OnlineDPOTrainer scores at the logits' own temperature
  rl::ExperienceMaker maker(*engine, models, options, tokenizer);
  rl::OnlineDpoLearner learner(config, *engine, models);
  const int64_t prompts_per_rollout = learner.pairs_per_rollout();
  (void)rl::rollout_share(2 * prompts_per_rollout, comm, rows_setting);
  const rl::RolloutSettings rollout_settings{2, config.train.seed, pad_id, rows_setting};

  std::cout << "train-dpo: online; " << prompts.size() << " prompts from " << config.data.prompt_file << ", "
            << evaluation.prompts() << " eval prompts; policy " << parameter_count(loaded.shape) << " parameters on "
            << device.str() << " in " << enum_name(config.train.precision) << "; rewards: " << rewards.describe()
            << "; reference: " << describe_reference(held, folder) << "\n";

  const int64_t per_pass = (static_cast<int64_t>(prompts.size()) + prompts_per_rollout - 1) / prompts_per_rollout;
  const int64_t total = config.train.max_steps > 0 ? config.train.max_steps : config.train.epochs * per_pass;
  int64_t step = 0;
  rl::RlRunLifecycle run(config, *engine, "train-dpo",
                         {{stage_trained_model(models.policy_name, *policy, loaded.shape, config, tokenizer), "policy"}},
                         [&](rl::RlRunState& state) { state.optimizer_steps = step; });
  rl::RlRunState& state = run.state;
  if (!run.resume(total)) state.first_eval = evaluation.run("before training");
  EpochSampler sampler(prompts.size(), static_cast<uint64_t>(config.train.seed), config.data.shuffle, run.prompt_cursor);
  step = state.optimizer_steps;

  std::cout << "train-dpo: " << total << " steps of " << prompts_per_rollout << " prompts x 2 answers, one optimizer "
            << "step each in micro-batches of " << config.train.micro_batch_size << " pairs\n"
            << engine->memory_report().summary();
  run.start();
  OnlineDpoRollouts algorithm(settings, learner, step, total);
  rl::run_rollout_loop(run, total,
                       {maker, rewards, prompts, sampler, prompts_per_rollout, rollout_settings, *engine,
                        chat_template.assistant_suffix},
                       algorithm);
  const nlohmann::json last_eval = evaluation.run("after training");
  run.finish(last_eval, step, nullptr);
}

}  // namespace ferry
