// y = x · Wᵀ (+ bias) for the few rows a decode step has. On the CPU, MKL's sgemm for a small
// x (M ≤ kSmallBatchRows rows) against a large weight spends much of its time copying the weight
// into its panel layout on every call; computing the transpose, yᵀ = W · xᵀ, makes the weight the
// streamed left operand and the small x the packed one: 1.2-1.4× faster for SmolLM2-135M's
// projections and LM head at 16-64 rows (2-core AMD EPYC, AVX-512). Each output is still one dot
// product over the input dimension; the two kernels may sum it in another order (≤ 1e-6 relative).
// Used without gradients only (generation); training, prefill and every other device take
// at::linear.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ferry::kernels {

inline constexpr int64_t kSmallBatchRows = 128;

// x: (..., K); weight: (N, K); bias: (N) or undefined. Returns (..., N), contiguous.
at::Tensor small_batch_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace ferry::kernels
