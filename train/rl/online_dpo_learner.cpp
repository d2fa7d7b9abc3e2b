// Online DPO's learning phase (see online_dpo_learner.h).
#include "train/rl/online_dpo_learner.h"

#include <torch/torch.h>

#include "core/error.h"
#include "offload/engine.h"
#include "src/data/token_batch.h"
#include "src/dist/communicator.h"
#include "train/backbone_runner.h"
#include "train/lr_schedule.h"
#include "train/optimizer_step.h"
#include "train/preference_losses.h"
#include "train/rl/policy_forward.h"

namespace ferry::rl {

RankedPairs rank_pairs(const torch::Tensor& scores) {
  FERRY_CHECK(scores.dim() == 1 && scores.size(0) % 2 == 0, "online DPO: two answers per prompt");
  const torch::Tensor pair = scores.view({-1, 2});
  const torch::Tensor first_wins = pair.select(1, 0).ge(pair.select(1, 1)).to(torch::kLong);  // (P)
  const torch::Tensor base = torch::arange(pair.size(0), torch::kLong) * 2;
  return {base + 1 - first_wins, base + first_wins};
}

PairLosses online_pair_losses(const DpoConfig& settings, const torch::Tensor& token_logps,
                              const torch::Tensor& reference_token_logps, const torch::Tensor& mask) {
  const int64_t pairs = token_logps.size(0) / 2;
  const torch::Tensor m = mask.to(token_logps.options());
  const torch::Tensor reference = reference_token_logps.to(token_logps.options()) * m;
  torch::Tensor sums = (token_logps * m).sum(1), reference_sums = reference.sum(1);
  torch::Tensor plain;
  if (settings.ld_alpha < 1.0) {  // LD-DPO over the answers' tokens, as the offline pairs
    const torch::Tensor targets = torch::where(m.gt(0), torch::zeros_like(m, torch::kLong),
                                               torch::full_like(m, kIgnoreLabel, torch::kLong));
    plain = sums;
    sums = length_desensitised_sums(token_logps * m, targets, settings.ld_alpha);
    reference_sums = length_desensitised_sums(reference, targets, settings.ld_alpha);
  }
  const torch::Tensor tokens = m.sum(1);
  auto rows = [&](int64_t start) {
    return SequenceLogps{sums.narrow(0, start, pairs), tokens.narrow(0, start, pairs),
                         plain.defined() ? plain.narrow(0, start, pairs) : torch::Tensor()};
  };
  PreferenceLogps logps;
  logps.chosen = rows(0);
  logps.rejected = rows(pairs);
  logps.reference_chosen = reference_sums.narrow(0, 0, pairs);
  logps.reference_rejected = reference_sums.narrow(0, pairs, pairs);
  const PreferenceLosses losses = preference_losses(settings, logps);
  return {losses.losses, preference_metrics(losses, logps)};
}

OnlineDpoLearner::OnlineDpoLearner(const Config& config, offload::ParameterEngine& engine, RolloutModels models)
    : config_(config), engine_(engine), models_(std::move(models)), share_(config) {
  FERRY_CHECK(models_.policy != nullptr, "online DPO learner needs a policy");
}

OnlineDpoStats OnlineDpoLearner::learn(const Experience& experience, int64_t& step, int64_t total_steps) {
  const TrainConfig& t = config_.train;
  FERRY_CHECK(experience.ref_logprobs.defined(), "online DPO needs the reference's log-probs");
  const LrSchedulePlan plan{t.learning_rate, t.lr_scheduler, t.warmup_steps, total_steps, t.min_lr_ratio};
  const std::vector<std::string> policy{models_.policy_name};
  const RankedPairs ranked = rank_pairs(experience.scores);
  const int64_t pairs = ranked.chosen.size(0), micro = t.micro_batch_size;
  const int64_t micro_batches = (pairs + micro - 1) / micro;
  engine_.make_resident({});
  BackboneRunner runner(engine_, t.gradient_checkpointing, t.logits_chunk);
  engine_.zero_grad(policy);

  OnlineDpoStats stats;
  // The pairs' logged values, summed (every process holds the same names, for the collective).
  MetricValues sums{{"rewards/chosen", 0},    {"rewards/rejected", 0}, {"rewards/margins", 0},
                    {"rewards/accuracies", 0}, {"logps/chosen", 0},     {"logps/rejected", 0}};
  double kl = 0, entropy = 0;
  for (const MicroBatchTurn turn : share_.turns(micro_batches)) {
    const int64_t begin = turn.index * micro, count = std::min(micro, pairs - begin);
    // Chosen rows first, then rejected: the pair layout of preference_losses.
    const torch::Tensor rows =
        torch::cat({ranked.chosen.narrow(0, begin, count), ranked.rejected.narrow(0, begin, count)});
    const Experience part = experience.select(rows);
    const PolicyForward forward = policy_forward(runner, models_.policy_name, *models_.policy, part,
                                                 /*temperature=*/1.0, /*entropy_grad=*/false, t.share_prompts);
    const torch::Tensor reference = part.ref_logprobs.to(forward.mask.device());
    const PairLosses losses = online_pair_losses(config_.dpo, forward.logprobs, reference, forward.mask);
    const torch::Tensor loss = losses.losses.sum() / static_cast<double>(pairs);
    const torch::Tensor total =  // with a Mixture of Experts' load-balancing loss
        runner.add_router_loss(loss, static_cast<double>(count) / static_cast<double>(pairs));
    (turn.padding ? loss * 0.0 : total).backward();  // a padding forward (ZeRO 3) adds nothing
    if (turn.padding) continue;
    torch::NoGradGuard no_grad;
    stats.loss += loss.item<double>();
    for (MetricValue& sum : sums) sum.value += find_metric(losses.sums, sum.name).value_or(0.0);
    const torch::Tensor answer_logps = (forward.logprobs.detach() * forward.mask).sum(1);
    kl += (answer_logps - (reference * forward.mask).sum(1)).sum().item<double>();
    entropy -= answer_logps.sum().item<double>();
    stats.tokens += part.attention_mask.sum().item<int64_t>();
  }
  finish_step_gradients(engine_);  // data parallel: summed over the processes
  stats.grad_norm = step_models(engine_, policy, learning_rate_at(plan, step), t.max_grad_norm, stats.skipped_steps).grad_norm;
  ++step;

  std::vector<double*> totals{&stats.loss, &kl, &entropy};
  for (MetricValue& v : sums) totals.push_back(&v.value);
  double tokens = static_cast<double>(stats.tokens);
  totals.push_back(&tokens);
  dist::sum_over_processes(totals, share_.comm);
  stats.tokens = static_cast<int64_t>(tokens);
  const double answers = 2.0 * static_cast<double>(pairs);
  stats.values.push_back({"objective/kl", kl / answers});
  stats.values.push_back({"objective/entropy", entropy / answers});
  stats.values.push_back({"objective/non_score_reward", -config_.dpo.beta * kl / answers});
  for (MetricValue& v : sums) stats.values.push_back({v.name, v.value / static_cast<double>(pairs)});
  stats.values.push_back({"grad_norm/policy", stats.grad_norm});
  return stats;
}

}  // namespace ferry::rl
