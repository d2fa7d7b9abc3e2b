// GRPO's learning phase (see grpo_learner.h).
#include "train/rl/grpo_learner.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "core/error.h"
#include "offload/engine.h"
#include "src/dist/communicator.h"
#include "train/backbone_runner.h"
#include "train/lr_schedule.h"
#include "train/optimizer_step.h"
#include "train/rl/grpo_loss.h"
#include "train/rl/policy_forward.h"

namespace ferry::rl {

MetricValues GrpoLearnStats::metrics() const {
  MetricValues values{{"policy_loss", loss},           {"entropy", entropy}, {"clip_ratio/low", clip_low},
                      {"clip_ratio/high", clip_high}, {"grad_norm/policy", grad_norm}};
  if (with_kl) values.push_back({"kl", kl});
  if (skipped_steps > 0) values.push_back({"skipped_steps", static_cast<double>(skipped_steps)});
  router.append_means(values);
  return values;
}

GrpoLearner::GrpoLearner(const Config& config, offload::ParameterEngine& engine, RolloutModels models)
    : config_(config),
      engine_(engine),
      models_(std::move(models)),
      share_(config) {
  FERRY_CHECK(models_.policy != nullptr, "GRPO learner needs a policy");
  // TRL warns about the same pairings: they run, but not as their papers do.
  const GrpoConfig& g = config.grpo;
  if (g.loss_type == GrpoLoss::luspo && g.importance_sampling_level != ImportanceSampling::sequence) {
    std::cout << "note: grpo.loss_type luspo is meant for importance_sampling_level sequence (the LUSPO paper's setup)\n";
  }
  if (g.loss_type == GrpoLoss::vespo && g.importance_sampling_level != ImportanceSampling::token) {
    std::cout << "note: grpo.loss_type vespo weighs whole sequences itself; importance_sampling_level should be token\n";
  }
}

int64_t GrpoLearner::minibatch_rows() const { return share_.minibatch_rows; }

int64_t GrpoLearner::steps_per_rollout(int64_t rows) const {
  return config_.grpo.num_iterations * share_.minibatches(rows);
}

GrpoLearnStats GrpoLearner::learn(const Experience& experience, int64_t& step, int64_t total_steps,
                                  at::Generator& generator) {
  const TrainConfig& t = config_.train;
  const GrpoConfig& g = config_.grpo;
  const double temperature = policy_temperature(config_.generation.greedy, config_.generation.temperature);
  const LrSchedulePlan plan{t.learning_rate, t.lr_scheduler, t.warmup_steps, total_steps, t.min_lr_ratio};
  const std::vector<std::string> policy{models_.policy_name};
  const int64_t rows = experience.rows(), micro_size = t.micro_batch_size;
  rl::GrpoLossSettings settings;
  settings.loss_type = g.loss_type;
  settings.level = g.importance_sampling_level;
  settings.epsilon_low = g.epsilon;
  settings.epsilon_high = g.epsilon_high > 0 ? g.epsilon_high : g.epsilon;
  settings.beta = g.beta;
  settings.bias_correction_kl = g.use_bias_correction_kl;
  settings.sapo_temperature_pos = g.sapo_temperature_pos;
  settings.sapo_temperature_neg = g.sapo_temperature_neg;
  settings.vespo_k_pos = g.vespo_k_pos;
  settings.vespo_lambda_pos = g.vespo_lambda_pos;
  settings.vespo_k_neg = g.vespo_k_neg;
  settings.vespo_lambda_neg = g.vespo_lambda_neg;
  rl::GrpoLossScale scale;
  scale.micro_batches_in_rollout = (rows + micro_size - 1) / micro_size;
  scale.rollout_tokens = experience.response_mask.sum().item<double>();
  // TRL's max_completion_length: a multi-turn episode's budget covers all its turns.
  scale.max_completion_length =
      config_.rollout.environment.empty() ? config_.generation.max_new_tokens : config_.rollout.max_total_tokens;
  engine_.make_resident({});
  BackboneRunner runner(engine_, t.gradient_checkpointing, t.logits_chunk);

  GrpoLearnStats stats;
  stats.with_kl = g.beta != 0.0;
  double token_count = 0;
  for (int64_t iteration = 0; iteration < g.num_iterations; ++iteration) {
    for (const torch::Tensor& chosen : share_.shuffled_minibatches(rows, generator)) {
      const Experience mb = experience.select(chosen);
      scale.micro_batches_in_step = (mb.rows() + micro_size - 1) / micro_size;
      engine_.zero_grad(policy);
      for (const MicroBatchTurn turn : share_.turns(scale.micro_batches_in_step)) {
        const int64_t micro = turn.index * micro_size;
        const Experience part = mb.select(torch::arange(micro, std::min(micro + micro_size, mb.rows())));
        const PolicyForward forward =
            policy_forward(runner, models_.policy_name, *models_.policy, part, temperature, /*entropy_grad=*/false,
                           t.share_prompts);
        auto on_device = [&](const torch::Tensor& x) { return x.defined() ? x.to(forward.mask.device()) : x; };
        const torch::Tensor old = part.logprobs.defined() ? on_device(part.logprobs) : forward.logprobs.detach();
        const rl::GrpoLossTerms terms = rl::grpo_loss(forward.logprobs, old, on_device(part.ref_logprobs),
                                                      on_device(part.advantages), forward.mask, settings, scale);
        const torch::Tensor total =  // with a Mixture of Experts' load-balancing loss
            runner.add_router_loss(terms.loss, 1.0 / static_cast<double>(scale.micro_batches_in_step));
        (turn.padding ? terms.loss * 0.0 : total).backward();  // a padding forward (ZeRO 3) adds nothing
        if (turn.padding) continue;
        torch::NoGradGuard no_grad;
        stats.router.add(runner.router_metrics(1.0));
        stats.loss += terms.loss.item<double>();
        stats.entropy += forward.entropy.sum().item<double>();
        stats.clip_low += terms.low_clipped.sum().item<double>();
        stats.clip_high += terms.high_clipped.sum().item<double>();
        if (terms.kl.defined()) stats.kl += terms.kl.sum().item<double>();
        token_count += forward.mask.sum().item<double>();
        stats.tokens += part.attention_mask.sum().item<int64_t>();
      }
      finish_step_gradients(engine_);  // data parallel: summed over the processes
      stats.grad_norm = step_models(engine_, policy, learning_rate_at(plan, step), t.max_grad_norm, stats.skipped_steps).grad_norm;
      ++step;
      ++stats.steps;
    }
  }
  double tokens = static_cast<double>(stats.tokens);  // the figures over every process's micro-batches
  dist::sum_over_processes({&stats.loss, &stats.entropy, &stats.clip_low, &stats.clip_high, &stats.kl, &token_count, &tokens},
                     share_.comm);
  stats.tokens = static_cast<int64_t>(tokens);
  const double n = std::max(token_count, 1.0);
  stats.loss /= static_cast<double>(std::max<int64_t>(stats.steps, 1));  // each step's loss, averaged
  stats.entropy /= n;
  stats.clip_low /= n;
  stats.clip_high /= n;
  stats.kl /= n;
  return stats;
}

}  // namespace ferry::rl
