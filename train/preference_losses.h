// The losses of preference learning, on per-pair scalars, as TRL 1.16 defines them (the reference
// the parity tests compare against: tests/parity/preference_losses_ref.py):
//
//   reward model   -log σ(r_c − r_r − margin) + center_rewards_coefficient · (r_c + r_r)²
//                  (TRL RewardTrainer; accuracy is r_c > r_r)
//   DPO family     with log-ratios ρ = log π(y|x) − log π_ref(y|x) summed over response tokens
//                  and δ = ρ_c − ρ_r:
//     sigmoid      −(1−ε) log σ(βδ) − ε log σ(−βδ)  (DPO; ε = label_smoothing gives conservative
//                  DPO as TRL ≤ 0.x and TRL's CPO define it; TRL 1.16's DPOTrainer has ε = 0 here)
//     robust       ((1−ε)(−log σ(βδ)) − ε(−log σ(−βδ))) / (1 − 2ε)
//     hinge        max(0, 1 − βδ)
//     ipo          (ρ_c/n_c − ρ_r/n_r − 1/(2β))², n the response's token count (TRL's normalisation)
//     simpo        reference-free, with mean log-probs ℓ = log π(y|x)/n: z = ℓ_c − ℓ_r − γ/β,
//                  −(1−ε) log σ(βz) − ε log σ(−βz), plus cpo_alpha · NLL(chosen) (TRL's CPO)
//     orpo         reference-free: NLL'(chosen) − β log σ(log odds(ℓ_c) − log odds(ℓ_r)), with
//                  log odds(ℓ) = ℓ − log(1 − e^ℓ) (TRL's ORPO)
//     exo_pair     σ(βδ)(log σ(βδ) − log(1−ε)) + σ(−βδ)(log σ(−βδ) − log ε)   (EXO; ε > 0)
//     nca_pair     −log σ(βρ_c) − ½ log σ(−βρ_c) − ½ log σ(−βρ_r)
//     bco_pair     −log σ(βρ_c) − log σ(−βρ_r)
//     sppo_hard    (ρ_c − 1/(2β))² + (ρ_r + 1/(2β))²
//     aot          δ' = sort(log π_c − log π_r) − sort(log π_ref,c − log π_ref,r), each sorted over
//                  the micro-batch; −(1−ε) log σ(βδ') − ε log σ(−βδ')
//     aot_unpaired the same with δ' = sort(ρ_c) − sort(ρ_r)
//     apo_zero     (1 − σ(βρ_c)) + σ(βρ_r);   apo_down  σ(βρ_c) + (1 − σ(β(ρ_c − ρ_r)))
//     discopop     with x = βδ and g = σ(x/τ): −log σ(x)(1 − g) + e^{−x} g
//     sigmoid_norm −log σ(β(ρ_c/n_c − ρ_r/n_r))
//     sft          NLL(chosen) alone (no reference)
//   A list of loss types adds their losses, each times its dpo.loss_weights entry (MPO).
//   ld_alpha < 1 (LD-DPO) replaces log π(y|x) and log π_ref(y|x) by the sum over the first
//   min(n_c, n_r) response tokens plus ld_alpha times the sum over the rest; NLL terms keep every token.
//   f_divergence_type replaces ρ by f'(π/π_ref) in δ for sigmoid, robust, hinge, ipo, exo_pair,
//   discopop and sigmoid_norm: forward_kl 1 − e^{−ρ}, js_divergence log 2 + log σ(ρ),
//   alpha_divergence (e^{(α−1)ρ} − 1)/(α − 1) (exponent clamped at 80); reverse_kl, DPO's, is ρ.
//   NLL(chosen) is the token mean over the micro-batch's chosen responses, as TRL's CPO computes it;
//   NLL'(chosen) takes every token of the chosen sequences after the first, prompt included, as
//   TRL's ORPO does. Either is added to every pair's loss so that the pairs' mean equals TRL's loss.
//   Logged rewards: β ρ for the DPO losses, β ℓ for simpo and orpo.
#pragma once

#include <torch/types.h>

#include <vector>

#include "core/config/config.h"
#include "src/metrics/metrics_row.h"

namespace ferry {

// Per-row log-probs of the label tokens.
struct SequenceLogps {
  torch::Tensor sum;     // (N) fp32, differentiable: Σ log p(label) (LD-DPO's weighted sum with dpo.ld_alpha < 1)
  torch::Tensor tokens;  // (N) fp32: labelled tokens
  torch::Tensor plain_sum;  // (N): Σ log p(label) at weight 1 when `sum` is weighted; undefined otherwise
};
// token_logps (N, T-1): the log-prob of each shifted label labels[:, 1:] (0 at kIgnoreLabel, as
// BackboneRunner::token_logprobs gives them); targets: those labels (N, T-1).
SequenceLogps sequence_logps(const torch::Tensor& token_logps, const torch::Tensor& targets);

// Reward-model loss of each pair (B): chosen/rejected rewards (B), margin (B) or undefined.
torch::Tensor reward_pair_losses(const torch::Tensor& chosen, const torch::Tensor& rejected, const torch::Tensor& margin,
                                 double center_rewards_coefficient);
// Summed over pairs (the loop divides by the pair count): accuracy, rewards/chosen,
// rewards/rejected, rewards/gap.
MetricValues reward_pair_metrics(const torch::Tensor& chosen, const torch::Tensor& rejected);

struct PreferenceLogps {
  SequenceLogps chosen, rejected;                            // the policy's, (B) each
  torch::Tensor reference_chosen, reference_rejected;        // (B); undefined for simpo and orpo
  SequenceLogps chosen_sequence;  // orpo only: every token of the chosen rows after the first
};

struct PreferenceLosses {
  torch::Tensor losses;                            // (B), differentiable; their mean is TRL's loss
  torch::Tensor chosen_rewards, rejected_rewards;  // (B), detached
};

// Whether the loss compares against a reference model (all but simpo, orpo and sft); for a list, any.
bool uses_reference(DpoLoss loss);
bool uses_reference(const std::vector<DpoLoss>& losses);

// LD-DPO (dpo.ld_alpha): the per-row sums of a pair batch's token log-probs (2B, T-1), chosen rows
// first, with the response tokens past the shorter response of each pair weighted by `alpha`
// (targets: the labels, kIgnoreLabel off the response).
torch::Tensor length_desensitised_sums(const torch::Tensor& token_logps, const torch::Tensor& targets, double alpha);

PreferenceLosses preference_losses(const DpoConfig& settings, const PreferenceLogps& logps);

// Summed over pairs: rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracies,
// logps/chosen, logps/rejected (TRL's names).
MetricValues preference_metrics(const PreferenceLosses& losses, const PreferenceLogps& logps);

}  // namespace ferry
