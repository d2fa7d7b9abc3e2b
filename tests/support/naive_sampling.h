// The reference for a sampled token, written out as a plain loop: a row's probabilities (1-D, any
// scale) and its one uniform draw u in [0, 1) pick the first token at which the running sum, in
// double, passes u x the row's total (inverse-CDF sampling, src/generate/sampling.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace ferry::test_support {

inline int64_t naive_inverse_cdf_sample(const at::Tensor& probs, double u) {
  const at::Tensor p = probs.to(at::kCPU, at::kFloat).contiguous();
  const float* values = p.data_ptr<float>();
  double total = 0;
  for (int64_t i = 0; i < p.numel(); ++i) total += values[i];
  double sum = 0;
  int64_t last_positive = -1;
  for (int64_t i = 0; i < p.numel(); ++i) {
    if (values[i] <= 0) continue;
    last_positive = i;
    sum += values[i];
    if (sum > u * total) return i;
  }
  return last_positive;
}

}  // namespace ferry::test_support
