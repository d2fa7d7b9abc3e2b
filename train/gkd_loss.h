// On-policy distillation's loss (`ferry train-distill`): the generalised Jensen-Shannon divergence
// of GKD, as TRL 1.16's GKDTrainer.generalized_jsd_loss computes it (the reference the parity test
// compares against: tests/parity/gkd_loss_ref.py). With s = log softmax(student logits / T) and
// t = log softmax(teacher logits / T) at one answer token, summed over the vocabulary:
//   beta 0        KL(teacher || student) = Σ e^t (t − s)
//   beta 1        KL(student || teacher) = Σ e^s (s − t)
//   otherwise     m = log(β e^t + (1 − β) e^s);  β Σ e^t (t − m) + (1 − β) Σ e^s (s − m)
// A micro-batch's loss is the mean over its answer tokens (TRL's "batchmean" over the mask).
#pragma once

#include <torch/types.h>

namespace ferry {

// Teacher log-probabilities (K, V) at temperature T, fp32, without gradients.
torch::Tensor teacher_log_probs(const torch::Tensor& teacher_logits, double temperature);

// Per-token divergence (K) between the student's logits (K, V; gradients flow) and the teacher's
// log-probabilities from teacher_log_probs.
torch::Tensor generalized_jsd(const torch::Tensor& student_logits, const torch::Tensor& teacher_log_probs, double beta,
                              double temperature);

}  // namespace ferry
