// KTO's loss and logged values (see kto_loss.h).
#include "train/preference/kto_loss.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace ferry {

KtoLosses kto_losses(const KtoConfig& s, const KtoLogps& logps) {
  const torch::Tensor ratio = logps.policy - logps.reference.to(logps.policy.options());
  const torch::Tensor desirable = logps.desirable.to(ratio.device(), at::kBool);
  KtoLosses out;
  torch::Tensor desirable_loss, undesirable_loss;
  if (s.loss_type == KtoLoss::kto) {
    FERRY_CHECK(logps.policy_kl.defined() && logps.reference_kl.defined(), "kto loss without the KL rows' log-probs");
    out.kl = (logps.policy_kl.detach() - logps.reference_kl.to(logps.policy_kl.options())).mean().clamp_min(0.0);
    desirable_loss = 1.0 - at::sigmoid(s.beta * (ratio - out.kl));
    undesirable_loss = 1.0 - at::sigmoid(s.beta * (out.kl - ratio));
  } else {  // apo_zero_unpaired
    out.kl = at::zeros({}, ratio.options());
    desirable_loss = 1.0 - at::sigmoid(s.beta * ratio);
    undesirable_loss = at::sigmoid(s.beta * ratio);
  }
  out.losses = at::where(desirable, s.desirable_weight * desirable_loss, s.undesirable_weight * undesirable_loss);
  out.rewards = (s.beta * ratio).detach();
  return out;
}

MetricValues kto_metrics(const KtoLosses& losses, const KtoLogps& logps) {
  const torch::Tensor desirable = logps.desirable.to(losses.rewards.device(), at::kBool);
  const double rows = static_cast<double>(desirable.size(0));
  // The mean of `values` over one class times the row count (0 when the class is absent).
  auto class_mean = [&](const torch::Tensor& values, bool of_desirable) {
    const torch::Tensor pick = of_desirable ? desirable : desirable.logical_not();
    const double count = pick.sum().item<double>();
    if (count == 0) return 0.0;
    return values.detach().to(at::kDouble).masked_select(pick).sum().item<double>() / count * rows;
  };
  const double chosen = class_mean(losses.rewards, true), rejected = class_mean(losses.rewards, false);
  return {{"kl", losses.kl.item<double>() * rows},
          {"rewards/chosen", chosen},
          {"rewards/rejected", rejected},
          {"rewards/margins", chosen - rejected},
          {"logps/chosen", class_mean(logps.policy, true)},
          {"logps/rejected", class_mean(logps.policy, false)}};
}

}  // namespace ferry
