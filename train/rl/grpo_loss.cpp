// GRPO's loss (see grpo_loss.h).
#include "train/rl/grpo_loss.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"

namespace ferry::rl {
namespace {

// VESPO's Gamma weight of each row's sequence ratio, without gradient (TRL's get_gamma_weights):
// phi(w) = exp(lambda + k log w - lambda w), log w = clamp(sum_t clamp(log r_t, -20, 20), log 1e-8, 20).
at::Tensor vespo_weights(const at::Tensor& a, const at::Tensor& log_ratio, const at::Tensor& m,
                         const GrpoLossSettings& s) {
  at::NoGradGuard no_grad;
  const double lower = std::log(1e-8);
  const at::Tensor log_w = (log_ratio.clamp(-20.0, 20.0) * m).sum(-1, /*keepdim=*/true).clamp(lower, 20.0);  // (B, 1)
  const at::Tensor nonneg = a >= 0;
  const at::Tensor k = at::where(nonneg, at::full_like(a, s.vespo_k_pos), at::full_like(a, s.vespo_k_neg));
  const at::Tensor lambda =
      at::where(nonneg, at::full_like(a, s.vespo_lambda_pos), at::full_like(a, s.vespo_lambda_neg)).clamp_min(1e-4);
  return at::nan_to_num((lambda + k * log_w - lambda * log_w.exp()).exp(), 0.0, 0.0, 0.0);
}

}  // namespace

GrpoLossTerms grpo_loss(const torch::Tensor& new_logprobs, const torch::Tensor& old_logprobs,
                        const torch::Tensor& ref_logprobs, const torch::Tensor& advantages, const torch::Tensor& mask,
                        const GrpoLossSettings& settings, const GrpoLossScale& scale) {
  const at::Tensor m = mask.to(new_logprobs.scalar_type());
  const at::Tensor a = advantages.dim() == 1 ? advantages.unsqueeze(1) : advantages;
  const at::Tensor log_ratio = new_logprobs - old_logprobs;
  at::Tensor log_weights = log_ratio;
  if (settings.level == ImportanceSampling::sequence) {
    log_weights = ((log_ratio * m).sum(-1) / m.sum(-1).clamp_min(1.0)).unsqueeze(-1);
  }
  const at::Tensor coef_1 = log_weights.exp();
  at::Tensor per_token;
  switch (settings.loss_type) {
    case GrpoLoss::cispo:
      per_token = -coef_1.clamp_max(settings.epsilon_high).detach() * a * new_logprobs;
      break;
    case GrpoLoss::sapo: {
      const at::Tensor tau = at::where(a > 0, at::full_like(a, settings.sapo_temperature_pos),
                                       at::full_like(a, settings.sapo_temperature_neg));
      per_token = -(at::sigmoid(tau * (coef_1 - 1)) * 4 / tau) * a;
      break;
    }
    case GrpoLoss::vespo:
      per_token = -vespo_weights(a, log_ratio, m, settings) * a * new_logprobs;
      break;
    default: {
      const at::Tensor coef_2 = coef_1.clamp(1 - settings.epsilon_low, 1 + settings.epsilon_high);
      per_token = -at::min(coef_1 * a, coef_2 * a);
    }
  }
  GrpoLossTerms out;
  if (settings.beta != 0.0) {
    FERRY_CHECK(ref_logprobs.defined(), "grpo_loss: beta > 0 without reference log-probs");
    const at::Tensor diff = ref_logprobs - new_logprobs;
    at::Tensor kl = diff.exp() - diff - 1;
    if (settings.bias_correction_kl) kl = kl * coef_1;
    per_token = per_token + settings.beta * kl;
    out.kl = (kl * m).detach();
  }
  const at::Tensor masked = per_token * m;
  const double in_step = static_cast<double>(scale.micro_batches_in_step);
  switch (settings.loss_type) {
    case GrpoLoss::grpo:
    case GrpoLoss::sapo:
      out.loss = (masked.sum(-1) / m.sum(-1).clamp_min(1.0)).mean() / in_step;
      break;
    case GrpoLoss::luspo:
      out.loss = masked.sum(-1).mean() / in_step;
      break;
    case GrpoLoss::bnpo:
      out.loss = masked.sum() / m.sum().clamp_min(1.0) / in_step;
      break;
    case GrpoLoss::dr_grpo:
      out.loss = masked.sum() / static_cast<double>(per_token.size(0) * scale.max_completion_length) / in_step;
      break;
    case GrpoLoss::dapo:
    case GrpoLoss::cispo:
    case GrpoLoss::vespo: {
      const double normaliser = std::max(scale.rollout_tokens, 1.0) * in_step /
                                static_cast<double>(scale.micro_batches_in_rollout);
      out.loss = masked.sum() / normaliser;
      break;
    }
  }
  out.per_token = masked.detach().expand_as(m);
  const at::Tensor ratio = coef_1.detach().expand_as(m);
  const at::Tensor adv = a.detach().expand_as(m);
  out.low_clipped = ((ratio < 1 - settings.epsilon_low) & (adv < 0)).to(m.scalar_type()) * m;
  out.high_clipped = ((ratio > 1 + settings.epsilon_high) & (adv > 0)).to(m.scalar_type()) * m;
  return out;
}

}  // namespace ferry::rl
