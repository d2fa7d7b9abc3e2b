// Statistics over the tokens a mask keeps (response tokens of a rollout), as TRL computes them:
// masked_mean, the unbiased masked_var and masked_whiten. Padding never enters a statistic.
#pragma once

#include <torch/types.h>

namespace ferry::rl {

// sum(x * mask) / sum(mask), over all elements (a scalar); 0 when the mask is empty.
torch::Tensor masked_mean(const torch::Tensor& x, const torch::Tensor& mask);
// sum(x * mask) / sum(mask) per row (dim 1): (B, T) -> (B); 0 for an empty row.
torch::Tensor masked_row_mean(const torch::Tensor& x, const torch::Tensor& mask);
// The masked variance with Bessel's correction (x n / (n - 1)), as TRL's masked_var(unbiased=True).
torch::Tensor masked_var(const torch::Tensor& x, const torch::Tensor& mask);
// (x - mean) / sqrt(var + 1e-8) with the masked mean and unbiased variance, then 0 outside the mask.
torch::Tensor masked_whiten(const torch::Tensor& x, const torch::Tensor& mask);

}  // namespace ferry::rl
