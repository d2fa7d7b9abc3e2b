// GKD's generalised Jensen-Shannon divergence (see gkd_loss.h).
#include "train/gkd_loss.h"

#include <ATen/ATen.h>

#include <cmath>

namespace ferry {

torch::Tensor teacher_log_probs(const torch::Tensor& teacher_logits, double temperature) {
  return at::log_softmax(teacher_logits.to(at::kFloat) / temperature, -1).detach();
}

torch::Tensor generalized_jsd(const torch::Tensor& student_logits, const torch::Tensor& teacher, double beta,
                              double temperature) {
  const torch::Tensor s = at::log_softmax(student_logits.to(at::kFloat) / temperature, -1);
  const torch::Tensor t = teacher.to(s.device(), at::kFloat);
  if (beta == 0.0) return (t.exp() * (t - s)).sum(-1);
  if (beta == 1.0) return (s.exp() * (s - t)).sum(-1);
  const torch::Tensor m = at::logsumexp(at::stack({s + std::log1p(-beta), t + std::log(beta)}), 0);
  return beta * (t.exp() * (t - m)).sum(-1) + (1.0 - beta) * (s.exp() * (s - m)).sum(-1);
}

}  // namespace ferry
