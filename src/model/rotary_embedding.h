// Rotary position embedding (RoPE), rotate-half convention as in Hugging Face: the inverse
// frequencies for plain, linear-scaled and llama3-scaled RoPE over a head's first rotary_dim
// channels (all of them unless partial_rotary_factor), the cos/sin tables for given position ids,
// and their application to queries and keys.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <utility>

#include "core/config/model_shape.h"

namespace ferry {

// (rotary_dim / 2) fp32 inverse frequencies, exactly as transformers computes them
// (`compute_default_rope_parameters`, `_compute_linear_scaling_rope_parameters`,
// `_compute_llama3_parameters`), for base `theta` and `scaling`.
at::Tensor rope_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling);
// The full-attention layers' frequencies of `config` (every layer's, unless sliding layers own theirs).
at::Tensor rope_inverse_frequencies(const ModelShape& config);

class RotaryEmbedding {
 public:
  // The full layers' RoPE of `config`.
  explicit RotaryEmbedding(const ModelShape& config);
  RotaryEmbedding(int64_t rotary_dim, double theta, const RopeScaling& scaling);

  // position_ids: (B, T) int64 -> cos, sin: (B, T, rotary_dim) in `dtype`. The angles are computed
  // in fp32 and only the result is cast, so bf16 models keep exact positions.
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& position_ids, at::ScalarType dtype) const;


 private:
  // Kept outside the module's buffers on purpose: `module.to(bf16)` must not round it.
  at::Tensor inv_freq_;  // (head_dim / 2) fp32, CPU
  mutable at::Tensor inv_freq_on_device_;  // the same on the device last used (no copy per step)
};

// x: (B, H, T, D), cos/sin: (B, T, D) -> x * cos + rotate_half(x) * sin, same shape as x.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace ferry
