// Masked statistics (see masked_stats.h).
#include "train/rl/masked_stats.h"

#include "core/error.h"

namespace ferry::rl {

torch::Tensor masked_mean(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor m = mask.to(x.scalar_type());
  return (x * m).sum() / m.sum().clamp_min(1e-12);
}

torch::Tensor masked_row_mean(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor m = mask.to(x.scalar_type());
  return (x * m).sum(1) / m.sum(1).clamp_min(1e-12);
}

torch::Tensor masked_var(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor m = mask.to(x.scalar_type());
  const torch::Tensor n = m.sum();
  if (n.item<double>() < 2) {
    throw InputError("advantage whitening needs at least 2 response tokens in a rollout; use a larger "
                     "ppo.rollout_batch_size or generation.max_new_tokens, or set ppo.whiten_advantages=false");
  }
  const torch::Tensor centred = x - masked_mean(x, m);
  const torch::Tensor var = masked_mean(centred * centred, m);
  return var * n / (n - 1);
}

torch::Tensor masked_whiten(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor m = mask.to(x.scalar_type());
  return (x - masked_mean(x, m)) * torch::rsqrt(masked_var(x, m) + 1e-8) * m;
}

}  // namespace ferry::rl
