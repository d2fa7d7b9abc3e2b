// Reward-model and DPO-family losses (see preference_losses.h).
#include "train/preference_losses.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "src/data/token_batch.h"

namespace ferry {
namespace {

double sum_of(const torch::Tensor& t) { return t.detach().to(at::kDouble).sum().item<double>(); }

// −(1−ε) log σ(x) − ε log σ(−x)
torch::Tensor smoothed_logistic(const torch::Tensor& x, double smoothing) {
  torch::Tensor loss = -at::log_sigmoid(x) * (1.0 - smoothing);
  if (smoothing > 0) loss = loss - at::log_sigmoid(-x) * smoothing;
  return loss;
}

// The NLL of `chosen` as one token mean over the micro-batch, as a (B) tensor (every token at weight 1,
// LD-DPO's weighting or not).
torch::Tensor chosen_nll(const SequenceLogps& chosen) {
  const torch::Tensor& sum = chosen.plain_sum.defined() ? chosen.plain_sum : chosen.sum;
  const torch::Tensor nll = -sum.sum() / chosen.tokens.sum().clamp_min(1.0);
  return nll.expand_as(chosen.sum);
}

// What a log-ratio log(pi / pi_ref) scores under the f-divergence the loss regularises with (f-DPO:
// f'(pi / pi_ref)); the reverse KL, DPO's own, is the log-ratio itself.
torch::Tensor divergence_score(const torch::Tensor& log_ratio, const DpoConfig& s) {
  switch (s.f_divergence_type) {
    case FDivergence::reverse_kl: return log_ratio;
    case FDivergence::forward_kl: return 1.0 - at::exp(-log_ratio);
    case FDivergence::js_divergence: return std::log(2.0) + at::log_sigmoid(log_ratio);
    case FDivergence::alpha_divergence: {
      const double a = s.f_alpha_divergence_coef;
      if (std::abs(a - 1.0) < 1e-6) return log_ratio;  // the limit: log t
      return (at::exp(((a - 1.0) * log_ratio).clamp_max(80.0)) - 1.0) / (a - 1.0);
    }
  }
  return log_ratio;
}

}  // namespace

SequenceLogps sequence_logps(const torch::Tensor& token_logps, const torch::Tensor& targets) {
  return {token_logps.sum(1), targets.ne(kIgnoreLabel).to(token_logps.device(), at::kFloat).sum(1)};
}

torch::Tensor reward_pair_losses(const torch::Tensor& chosen, const torch::Tensor& rejected, const torch::Tensor& margin,
                                 double center_rewards_coefficient) {
  torch::Tensor difference = chosen - rejected;
  if (margin.defined()) difference = difference - margin.to(difference.device(), difference.scalar_type());
  torch::Tensor losses = -at::log_sigmoid(difference);
  if (center_rewards_coefficient > 0) losses = losses + center_rewards_coefficient * (chosen + rejected).pow(2);
  return losses;
}

MetricValues reward_pair_metrics(const torch::Tensor& chosen, const torch::Tensor& rejected) {
  return {{"accuracy", sum_of(chosen.gt(rejected))},
          {"rewards/chosen", sum_of(chosen)},
          {"rewards/rejected", sum_of(rejected)},
          {"rewards/gap", sum_of(chosen - rejected)}};
}

bool uses_reference(DpoLoss loss) {
  return loss != DpoLoss::simpo && loss != DpoLoss::orpo && loss != DpoLoss::sft;
}

bool uses_reference(const std::vector<DpoLoss>& losses) {
  return std::any_of(losses.begin(), losses.end(), [](DpoLoss l) { return uses_reference(l); });
}

torch::Tensor length_desensitised_sums(const torch::Tensor& token_logps, const torch::Tensor& targets, double alpha) {
  const int64_t b = targets.size(0) / 2;
  FERRY_CHECK(targets.size(0) == 2 * b && token_logps.sizes() == targets.sizes(),
              "length_desensitised_sums: a pair batch of (2B, T) log-probs and targets");
  const torch::Tensor counted = targets.ne(kIgnoreLabel).to(token_logps.device(), at::kLong);  // (2B, T)
  const torch::Tensor position = counted.cumsum(1);  // the k-th response token has k
  const torch::Tensor lengths = counted.sum(1);
  const torch::Tensor shared = at::minimum(lengths.narrow(0, 0, b), lengths.narrow(0, b, b)).repeat({2}).unsqueeze(1);
  const torch::Tensor in_shared = (counted.gt(0) & position.le(shared)).to(token_logps.scalar_type());
  const torch::Tensor in_tail = (counted.gt(0) & position.gt(shared)).to(token_logps.scalar_type());
  return (token_logps * in_shared).sum(1) + alpha * (token_logps * in_tail).sum(1);
}

namespace {

// One loss type's per-pair losses (B). Reference-free losses read the mean log-probs; the others the
// log-ratios (and their f-divergence scores).
torch::Tensor one_loss(DpoLoss type, const DpoConfig& s, const PreferenceLogps& logps) {
  const double beta = s.beta, smoothing = s.label_smoothing;
  const torch::Tensor chosen_mean = logps.chosen.sum / logps.chosen.tokens.clamp_min(1.0);        // (B)
  const torch::Tensor rejected_mean = logps.rejected.sum / logps.rejected.tokens.clamp_min(1.0);  // (B)
  switch (type) {
    case DpoLoss::simpo: {
      const torch::Tensor z = chosen_mean - rejected_mean - s.simpo_gamma / beta;
      torch::Tensor losses = smoothed_logistic(beta * z, smoothing);
      if (s.cpo_alpha > 0) losses = losses + s.cpo_alpha * chosen_nll(logps.chosen);
      return losses;
    }
    case DpoLoss::sft:  // the chosen answers' NLL alone
      return chosen_nll(logps.chosen);
    case DpoLoss::orpo: {
      // log(1 − e^ℓ) for ℓ < 0, stably: log(−expm1(ℓ)).
      auto log_odds = [](const torch::Tensor& l) { return l - at::log(-at::expm1(l)); };
      const torch::Tensor ratio = at::log_sigmoid(log_odds(chosen_mean) - log_odds(rejected_mean));
      FERRY_CHECK(logps.chosen_sequence.sum.defined(), "orpo needs the chosen sequences' log-probs");
      return chosen_nll(logps.chosen_sequence) - beta * ratio;
    }
    default:
      break;
  }
  FERRY_CHECK(logps.reference_chosen.defined() && logps.reference_rejected.defined(),
              "dpo loss ", enum_name(type), " without reference log-probs");
  const torch::Tensor chosen_ratio = logps.chosen.sum - logps.reference_chosen.to(logps.chosen.sum.options());
  const torch::Tensor rejected_ratio = logps.rejected.sum - logps.reference_rejected.to(logps.rejected.sum.options());
  const torch::Tensor chosen_score = divergence_score(chosen_ratio, s);
  const torch::Tensor rejected_score = divergence_score(rejected_ratio, s);
  const torch::Tensor delta = chosen_score - rejected_score;
  // −(1−ε) log σ(βx) − ε log σ(−βx) of each row's x
  auto smoothed = [&](const torch::Tensor& x) {
    return -at::log_sigmoid(beta * x) * (1.0 - smoothing) - at::log_sigmoid(-beta * x) * smoothing;
  };
  switch (type) {
    case DpoLoss::sigmoid:
      return smoothed_logistic(beta * delta, smoothing);
    case DpoLoss::robust:
      return (-(1.0 - smoothing) * at::log_sigmoid(beta * delta) + smoothing * at::log_sigmoid(-beta * delta)) /
             (1.0 - 2.0 * smoothing);
    case DpoLoss::hinge:
      return at::relu(1.0 - beta * delta);
    case DpoLoss::ipo: {
      const torch::Tensor normalised = chosen_score / logps.chosen.tokens.clamp_min(1.0) -
                                       rejected_score / logps.rejected.tokens.clamp_min(1.0);
      return (normalised - 1.0 / (2.0 * beta)).pow(2);
    }
    case DpoLoss::exo_pair: {  // KL(softmax over the pair of beta x score || [1 − ε, ε])
      const torch::Tensor x = beta * delta;
      return at::sigmoid(x) * (at::log_sigmoid(x) - std::log1p(-smoothing)) +
             at::sigmoid(-x) * (at::log_sigmoid(-x) - std::log(smoothing));
    }
    case DpoLoss::nca_pair:
      return -at::log_sigmoid(beta * chosen_ratio) - 0.5 * at::log_sigmoid(-beta * chosen_ratio) -
             0.5 * at::log_sigmoid(-beta * rejected_ratio);
    case DpoLoss::bco_pair:
      return -at::log_sigmoid(beta * chosen_ratio) - at::log_sigmoid(-beta * rejected_ratio);
    case DpoLoss::sppo_hard:
      return (chosen_ratio - 0.5 / beta).pow(2) + (rejected_ratio + 0.5 / beta).pow(2);
    case DpoLoss::aot: {  // the policy's and the reference's margins, each sorted over the micro-batch
      const torch::Tensor policy_margin = std::get<0>((logps.chosen.sum - logps.rejected.sum).sort(0));
      const torch::Tensor reference_margin = std::get<0>(
          (logps.reference_chosen - logps.reference_rejected).to(policy_margin.options()).sort(0));
      return smoothed(policy_margin - reference_margin);
    }
    case DpoLoss::aot_unpaired:  // the chosen and the rejected log-ratios, each sorted
      return smoothed(std::get<0>(chosen_ratio.sort(0)) - std::get<0>(rejected_ratio.sort(0)));
    case DpoLoss::apo_zero:
      return (1.0 - at::sigmoid(beta * chosen_ratio)) + at::sigmoid(beta * rejected_ratio);
    case DpoLoss::apo_down:
      return at::sigmoid(beta * chosen_ratio) + (1.0 - at::sigmoid(beta * (chosen_ratio - rejected_ratio)));
    case DpoLoss::discopop: {  // logistic and exponential parts, gated by the margin
      const torch::Tensor x = beta * delta;
      const torch::Tensor gate = at::sigmoid(x / s.discopop_tau);
      return -at::log_sigmoid(x) * (1.0 - gate) + at::exp(-x) * gate;
    }
    case DpoLoss::sigmoid_norm: {
      const torch::Tensor normalised = chosen_score / logps.chosen.tokens.clamp_min(1.0) -
                                       rejected_score / logps.rejected.tokens.clamp_min(1.0);
      return -at::log_sigmoid(beta * normalised);
    }
    default:
      throw InternalError("unhandled dpo.loss_type");
  }
}

}  // namespace

PreferenceLosses preference_losses(const DpoConfig& s, const PreferenceLogps& logps) {
  FERRY_CHECK(!s.loss_type.empty(), "dpo.loss_type is empty");
  FERRY_CHECK(s.loss_weights.empty() || s.loss_weights.size() == s.loss_type.size(),
              "dpo.loss_weights: one weight per loss type");
  PreferenceLosses out;
  for (size_t k = 0; k < s.loss_type.size(); ++k) {  // MPO: the weighted sum of the losses
    const double weight = s.loss_weights.empty() ? 1.0 : s.loss_weights[k];
    const torch::Tensor losses = one_loss(s.loss_type[k], s, logps) * weight;
    out.losses = out.losses.defined() ? out.losses + losses : losses;
  }
  if (uses_reference(s.loss_type)) {
    out.chosen_rewards = (s.beta * (logps.chosen.sum - logps.reference_chosen.to(logps.chosen.sum.options()))).detach();
    out.rejected_rewards =
        (s.beta * (logps.rejected.sum - logps.reference_rejected.to(logps.rejected.sum.options()))).detach();
  } else {
    out.chosen_rewards = (s.beta * logps.chosen.sum / logps.chosen.tokens.clamp_min(1.0)).detach();
    out.rejected_rewards = (s.beta * logps.rejected.sum / logps.rejected.tokens.clamp_min(1.0)).detach();
  }
  return out;
}

MetricValues preference_metrics(const PreferenceLosses& l, const PreferenceLogps& logps) {
  return {{"rewards/chosen", sum_of(l.chosen_rewards)},
          {"rewards/rejected", sum_of(l.rejected_rewards)},
          {"rewards/margins", sum_of(l.chosen_rewards - l.rejected_rewards)},
          {"rewards/accuracies", sum_of(l.chosen_rewards.gt(l.rejected_rewards))},
          {"logps/chosen", sum_of(logps.chosen.sum)},
          {"logps/rejected", sum_of(logps.rejected.sum)}};
}

}  // namespace ferry
