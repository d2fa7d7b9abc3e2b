// Rotary position embedding (RoPE), rotate-half convention as in Hugging Face: the inverse
// frequencies for plain, linear-scaled, llama3-scaled and LongRoPE over a head's first rotary_dim
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
// `_compute_llama3_parameters`, `_compute_longrope_parameters`), for base `theta` and `scaling`.
// longrope: the short factors' frequencies, or with `long_context` the long factors'.
at::Tensor rope_inverse_frequencies(int64_t rotary_dim, double theta, const RopeScaling& scaling,
                                    bool long_context = false);
// The full-attention layers' frequencies of `config` (every layer's, unless sliding layers own theirs).
at::Tensor rope_inverse_frequencies(const ModelShape& config);

class RotaryEmbedding {
 public:
  // The full layers' RoPE of `config`.
  explicit RotaryEmbedding(const ModelShape& config);
  RotaryEmbedding(int64_t rotary_dim, double theta, const RopeScaling& scaling);

  // position_ids: (B, T) int64 -> cos, sin: (B, T, rotary_dim) in `dtype`. The angles are computed
  // in fp32 and only the result is cast, so bf16 models keep exact positions. LongRoPE, as
  // transformers' dynamic_rope_update: the long factors when max(position_ids) + 1 exceeds the
  // original context (chosen on the device, no host sync), and cos, sin times the attention factor.
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& position_ids, at::ScalarType dtype) const;

 private:
  // Kept outside the module's buffers on purpose: `module.to(bf16)` must not round it.
  at::Tensor inv_freq_;  // (head_dim / 2) fp32, CPU
  mutable at::Tensor inv_freq_on_device_;  // the same on the device last used (no copy per step)
  // LongRoPE only (else undefined / 1): the long factors' frequencies, the context beyond which they
  // apply, and the cos/sin scale.
  at::Tensor long_inv_freq_;
  mutable at::Tensor long_inv_freq_on_device_;
  int64_t original_context_ = 0;
  double attention_scaling_ = 1.0;
};

// x: (B, H, T, D), cos/sin: (B, T, D) -> x * cos + rotate_half(x) * sin, same shape as x.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace ferry
