// GRPO's loss as TRL's GRPOTrainer computes it (_compute_loss): the importance ratio per token or,
// at the sequence level (GSPO), exp of the sequence's mean log-ratio; the clipped surrogate
// -min(ratio A, clamp(ratio, 1 - epsilon, 1 + epsilon_high) A); plus beta x the k3 KL to the
// reference (times the ratio with use_bias_correction_kl); then aggregated by loss_type:
//   grpo     mean over rows of each row's masked mean, / micro-batches in the step
//   bnpo     masked sum / the micro-batch's tokens, / micro-batches in the step
//   dr_grpo  masked sum / (rows x max_new_tokens), / micro-batches in the step
//   dapo     masked sum / (the rollout's tokens x micro-batches in the step / micro-batches in the rollout)
// so the micro-batches of one optimizer step add up to its loss, as under TRL's gradient accumulation.
// TRL 1.16's other loss types change the per-token term (r the importance ratio, A the advantage):
//   cispo    -sg(min(r, epsilon_high)) A log pi (MiniMax-M1: the weight is clipped, not the update),
//            aggregated as dapo
//   sapo     -sigmoid(tau (r - 1)) 4 / tau A, tau = sapo_temperature_pos when A > 0 else _neg (a soft
//            gate instead of the clip), aggregated as grpo
//   luspo    grpo's clipped term, summed per sequence and averaged over sequences, / micro-batches in
//            the step (GSPO scaled by length; with sequence-level ratios)
//   vespo    -sg(phi(w)) A log pi with w = exp(clamp(sum_t log r_t)) the sequence ratio and
//            phi(w) = exp(lambda + k log w - lambda w) (k, lambda by the sign of A), aggregated as dapo
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "core/config/config_enum.h"

namespace ferry::rl {

struct GrpoLossSettings {
  GrpoLoss loss_type = GrpoLoss::dapo;
  ImportanceSampling level = ImportanceSampling::token;
  double epsilon_low = 0.2, epsilon_high = 0.2;
  double beta = 0.0;
  bool bias_correction_kl = true;
  double sapo_temperature_pos = 1.0, sapo_temperature_neg = 1.05;
  double vespo_k_pos = 2.0, vespo_lambda_pos = 3.0, vespo_k_neg = 3.0, vespo_lambda_neg = 2.0;
};

// How this micro-batch's masked sum is scaled (TRL's normalisers; see the file comment).
struct GrpoLossScale {
  int64_t micro_batches_in_step = 1;     // TRL's current_gradient_accumulation_steps
  int64_t micro_batches_in_rollout = 1;  // TRL's steps_per_generation
  double rollout_tokens = 1;             // TRL's num_items_in_batch: counted tokens of the whole rollout
  int64_t max_completion_length = 1;     // generation.max_new_tokens
};

struct GrpoLossTerms {
  torch::Tensor loss;          // scalar: this micro-batch's part of the step's loss (backward it)
  torch::Tensor per_token;     // (B, T) detached, 0 outside the mask
  torch::Tensor kl;            // (B, T) detached k3 KL, 0 outside the mask; undefined when beta is 0
  torch::Tensor low_clipped;   // (B, T) 1 where ratio < 1 - epsilon_low and A < 0 (masked)
  torch::Tensor high_clipped;  // (B, T) 1 where ratio > 1 + epsilon_high and A > 0 (masked)
};

// new_logprobs (B, T) with gradients; old and ref (B, T); advantages (B) or (B, T); mask (B, T) 1/0.
GrpoLossTerms grpo_loss(const torch::Tensor& new_logprobs, const torch::Tensor& old_logprobs,
                        const torch::Tensor& ref_logprobs, const torch::Tensor& advantages, const torch::Tensor& mask,
                        const GrpoLossSettings& settings, const GrpoLossScale& scale);

}  // namespace ferry::rl
