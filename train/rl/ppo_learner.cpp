// PPO's learning phase (see ppo_learner.h).
#include "train/rl/ppo_learner.h"

#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "offload/engine.h"
#include "src/dist/communicator.h"
#include "src/model/attention_mask.h"
#include "src/model/model_heads.h"
#include "train/backbone_runner.h"
#include "train/causal_lm_loss.h"
#include "train/lr_schedule.h"
#include "train/optimizer_step.h"
#include "train/rl/masked_stats.h"
#include "train/rl/policy_forward.h"
#include "train/rl/policy_losses.h"
#include "train/training_task.h"

namespace ferry::rl {

MetricValues LearnStats::metrics() const {
  MetricValues values{{"policy_loss", policy_loss}, {"entropy", entropy}, {"clipfrac", clipfrac},
                      {"approx_kl", approx_kl}, {"grad_norm/policy", policy_grad_norm}};
  if (critic) {
    values.push_back({"value_loss", value_loss});
    values.push_back({"value_clipfrac", value_clipfrac});
    values.push_back({"grad_norm/critic", critic_grad_norm});
  }
  if (ptx_loss != 0) values.push_back({"ptx_loss", ptx_loss});
  if (skipped_steps > 0) values.push_back({"skipped_steps", static_cast<double>(skipped_steps)});
  router.append_means(values);
  return values;
}

PpoLearner::PpoLearner(const Config& config, offload::ParameterEngine& engine, RolloutModels models, BatchSource* ptx)
    : config_(config),
      engine_(engine),
      models_(std::move(models)),
      ptx_(ptx),
      share_(config) {
  FERRY_CHECK(models_.policy != nullptr, "PPO learner needs a policy");
  FERRY_CHECK((models_.critic != nullptr) == (config.ppo.advantage_estimator == AdvantageEstimator::gae),
              "PPO learner: a critic exactly when advantages come from GAE");
}

int64_t PpoLearner::minibatch_rows() const { return share_.minibatch_rows; }

int64_t PpoLearner::steps_per_rollout(int64_t rows) const {
  return config_.ppo.ppo_epochs * share_.minibatches(rows);
}

LearnStats PpoLearner::learn(const Experience& experience, int64_t& step, int64_t total_steps,
                             at::Generator& generator) {
  const TrainConfig& t = config_.train;
  const PpoConfig& p = config_.ppo;
  const double temperature = policy_temperature(config_.generation.greedy, config_.generation.temperature);
  const LrSchedulePlan policy_plan{t.learning_rate, t.lr_scheduler, t.warmup_steps, total_steps, t.min_lr_ratio};
  const LrSchedulePlan critic_plan{p.critic_learning_rate, t.lr_scheduler, t.warmup_steps, total_steps, t.min_lr_ratio};
  const std::vector<std::string> policy{models_.policy_name}, critic{models_.critic_name};
  const int64_t rows = experience.rows(), prompt_length = experience.prompt_length;
  const int64_t world = share_.comm != nullptr ? share_.comm->size() : 1;
  const int64_t rank = share_.comm != nullptr ? share_.comm->rank() : 0;
  engine_.make_resident({});
  const bool with_critic = models_.critic != nullptr;
  BackboneRunner runner(engine_, t.gradient_checkpointing, t.logits_chunk);

  LearnStats stats;
  stats.critic = with_critic;
  double token_count = 0;  // response tokens over all minibatches, for the means
  double ptx_batches = 0;
  for (int64_t epoch = 0; epoch < p.ppo_epochs; ++epoch) {
    for (const torch::Tensor& chosen : share_.shuffled_minibatches(rows, generator)) {
      const Experience mb = experience.select(chosen);
      const double mb_tokens = std::max(mb.response_mask.sum().item<double>(), 1.0);
      engine_.zero_grad(policy);
      if (with_critic) engine_.zero_grad(critic);
      const int64_t micro_batches = (mb.rows() + t.micro_batch_size - 1) / t.micro_batch_size;
      for (const MicroBatchTurn turn : share_.turns(micro_batches)) {
        const int64_t micro = turn.index * t.micro_batch_size;
        const Experience part = mb.select(torch::arange(micro, std::min(micro + t.micro_batch_size, mb.rows())));
        const double weight = turn.padding ? 0.0 : 1.0;  // a padding forward (ZeRO 3) adds nothing
        const PolicyForward forward =
            policy_forward(runner, models_.policy_name, *models_.policy, part, temperature, p.entropy_coef > 0,
                           config_.train.share_prompts);
        const torch::Tensor& device_mask = forward.mask;
        const torch::Tensor& new_logprobs = forward.logprobs;
        const torch::Tensor& entropy = forward.entropy;
        auto on_device = [&](const torch::Tensor& x) { return x.to(device_mask.device()); };
        const rl::ClippedLoss pg = rl::clipped_policy_loss(new_logprobs, on_device(part.logprobs),
                                                          on_device(part.advantages), device_mask, p.clip_eps);
        torch::Tensor loss = pg.per_token.sum();
        if (models_.critic != nullptr) {  // GAE: the critic learns the returns
          const torch::Tensor positions = position_ids_from_attention_mask(part.attention_mask);
          const torch::Tensor values = response_values(
              runner.score(models_.critic_name, *models_.critic, part.sequences, part.attention_mask, positions),
              prompt_length, part.response_mask);
          const rl::ClippedLoss vf = rl::clipped_value_loss(values.to(device_mask.device()), on_device(part.values),
                                                           on_device(part.returns), device_mask, p.value_clip_eps);
          loss = loss + p.vf_coef * vf.per_token.sum();
          if (!turn.padding) {
            stats.value_loss += vf.per_token.sum().item<double>();
            stats.value_clipfrac += vf.clipped.sum().item<double>();
            stats.tokens += part.attention_mask.sum().item<int64_t>();
          }
        }
        if (p.entropy_coef > 0) loss = loss - p.entropy_coef * entropy.sum();
        // A Mixture of Experts adds its load-balancing loss.
        runner.add_router_loss(loss * (weight / mb_tokens), weight / static_cast<double>(micro_batches)).backward();
        if (!turn.padding) {
          torch::NoGradGuard no_grad;
          stats.router.add(runner.router_metrics(1.0));
          const torch::Tensor diff = (new_logprobs - on_device(part.logprobs)) * device_mask;
          stats.policy_loss += pg.per_token.sum().item<double>();
          stats.entropy += entropy.sum().item<double>();
          stats.clipfrac += pg.clipped.sum().item<double>();
          stats.approx_kl += 0.5 * (diff * diff).sum().item<double>();
          stats.tokens += part.attention_mask.sum().item<int64_t>();
        }
      }
      if (ptx_ != nullptr) {  // pretraining mix: one SFT micro-batch per policy step and process
        // Every process draws the step's N batches (the same cursor everywhere) and learns from its own.
        MicroBatch batch;
        for (int64_t r = 0; r < world; ++r) {
          MicroBatch next = ptx_->next_train_batch();
          if (r == rank) batch = std::move(next);
        }
        const torch::Tensor sum = causal_lm_loss_sum(runner, models_.policy_name, *models_.policy, batch);
        const double labels = static_cast<double>(std::max<int64_t>(batch.loss_weight, 1));
        (sum * (p.ptx_coef / (labels * static_cast<double>(world)))).backward();
        stats.ptx_loss += sum.item<double>() / labels;
        ptx_batches += 1;
        stats.tokens += batch.tokens;
      }
      token_count += mb_tokens;
      finish_step_gradients(engine_);  // data parallel: summed over the processes
      auto update = [&](const std::vector<std::string>& model, const LrSchedulePlan& plan, double& norm_out) {
        norm_out = step_models(engine_, model, learning_rate_at(plan, step), t.max_grad_norm, stats.skipped_steps).grad_norm;
      };
      update(policy, policy_plan, stats.policy_grad_norm);
      if (models_.critic != nullptr) update(critic, critic_plan, stats.critic_grad_norm);
      ++step;
      ++stats.steps;
    }
  }
  double tokens = static_cast<double>(stats.tokens);  // the figures over every process's micro-batches
  dist::sum_over_processes({&stats.policy_loss, &stats.value_loss, &stats.entropy, &stats.clipfrac, &stats.value_clipfrac,
                      &stats.approx_kl, &stats.ptx_loss, &ptx_batches, &tokens},
                     share_.comm);
  stats.tokens = static_cast<int64_t>(tokens);
  const double n = std::max(token_count, 1.0);
  stats.policy_loss /= n;
  stats.value_loss /= n;
  stats.entropy /= n;
  stats.clipfrac /= n;
  stats.value_clipfrac /= n;
  stats.approx_kl /= n;
  if (ptx_batches > 0) stats.ptx_loss /= ptx_batches;
  return stats;
}

}  // namespace ferry::rl
