// GRPO's loss (see grpo_loss.h).
#include "train/rl/grpo_loss.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace ferry::rl {

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
  const at::Tensor coef_2 = coef_1.clamp(1 - settings.epsilon_low, 1 + settings.epsilon_high);
  at::Tensor per_token = -at::min(coef_1 * a, coef_2 * a);
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
      out.loss = (masked.sum(-1) / m.sum(-1).clamp_min(1.0)).mean() / in_step;
      break;
    case GrpoLoss::bnpo:
      out.loss = masked.sum() / m.sum().clamp_min(1.0) / in_step;
      break;
    case GrpoLoss::dr_grpo:
      out.loss = masked.sum() / static_cast<double>(per_token.size(0) * scale.max_completion_length) / in_step;
      break;
    case GrpoLoss::dapo: {
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
