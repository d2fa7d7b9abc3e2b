// Shared by the int8-moment AdamW paths (reference, AVX2, AVX-512): the 8-bit codes as scalar functions
// (the definition; the SIMD path does the same integer and float operations lane by lane), the
// one-parameter step, and the per-path range kernels.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/adamw_internal.h"
#include "kernels/cpu/half_convert.h"

namespace ferry::kernels::adamw_int8_detail {

using adamw_detail::Coefficients;
using adamw_detail::rounded;

// A magnitude code c > 0 is the fp32 number with bit pattern (c + offset) << shift: consecutive
// codes are consecutive fp32 values with (23 - shift) mantissa bits, and the largest code is 1.0.
// Code 0 is 0.
constexpr int kExpAvgShift = 20;                                // 3 mantissa bits
constexpr int32_t kExpAvgMaxCode = 127;
constexpr int32_t kExpAvgOffset = (127 << 3) - kExpAvgMaxCode;  // 889: code 1 = 1.25 * 2^-16
constexpr int kExpAvgSqShift = 19;                              // 4 mantissa bits
constexpr int32_t kExpAvgSqMaxCode = 255;
constexpr int32_t kExpAvgSqOffset = (127 << 4) - kExpAvgSqMaxCode;  // 1777: code 1 = 1.125 * 2^-16
// |m| / absmax at or above this rounds to code 1 rather than 0: half of code 1's value.
constexpr float kExpAvgHalfSmallest = 0x1.4p-17f;  // 0.625 * 2^-16
constexpr uint32_t kSignBit = 0x80000000u;
constexpr float kMinNormal = 0x1p-126f;

// Rounding x >= 0 to the nearest code is one integer add and shift of its bit pattern u:
// code = (u + half - (offset << shift)) >> shift, arithmetic (negative below code 1's range).
// Consecutive codes are consecutive patterns at that bit, so this rounds to the nearest code value,
// exact ties (x halfway between two codes) away from zero.
constexpr uint32_t rounding_addend(int shift, int32_t offset) {
  return (1u << (shift - 1)) - (uint32_t(offset) << shift);
}
inline int32_t round_to_code(float x, int shift, int32_t offset) {
  return int32_t(std::bit_cast<uint32_t>(x) + rounding_addend(shift, offset)) >> shift;
}

// The value of magnitude code c in [0, max code], relative to the block's scale.
inline float exp_avg_magnitude(int32_t c) {
  return c == 0 ? 0.0f : std::bit_cast<float>(uint32_t(c + kExpAvgOffset) << kExpAvgShift);
}
inline float exp_avg_sq_magnitude(int32_t c) {
  return c == 0 ? 0.0f : std::bit_cast<float>(uint32_t(c + kExpAvgSqOffset) << kExpAvgSqShift);
}

// m from its code: the magnitude times the scale (one rounding), then the sign.
inline float decode_exp_avg(int8_t code, float scale) {
  const float magnitude = rounded(exp_avg_magnitude(code < 0 ? -code : code) * scale);
  return code < 0 ? -magnitude : magnitude;
}
// sqrt(v) from its code; v is then rounded(s * s).
inline float decode_exp_avg_sq_root(uint8_t code, float scale) {
  return rounded(exp_avg_sq_magnitude(code) * scale);
}

// The scale stored for a block of absmax `absmax` and what the encoders multiply by. absmax is a
// max over values >= 0 (NaNs skipped), so it is >= 0 or +inf.
struct BlockScale {
  float stored;
  float inverse;
};
inline BlockScale block_scale(float absmax) {
  if (!(absmax >= kMinNormal)) return {0.0f, 0.0f};  // all zero, or too small for 1/absmax
  return {absmax, 1.0f / absmax};
}

// m -> code, given the block's BlockScale::inverse: x = |m| * inverse, at most 1 + 2^-23 for
// finite m (so it needs no clamp), rounded to the nearest code value, 0 included (below half of
// code 1's value). Non-finite m (x is NaN) saturates as the SIMD path's packing does.
inline int8_t encode_exp_avg(float m, float inverse_scale) {
  const uint32_t bits = std::bit_cast<uint32_t>(m);
  const float x = std::bit_cast<float>(bits & ~kSignBit) * inverse_scale;
  const int32_t rounded_code = round_to_code(x, kExpAvgShift, kExpAvgOffset);
  const int32_t smallest = x >= kExpAvgHalfSmallest ? 1 : 0;
  const int32_t magnitude = rounded_code > smallest ? rounded_code : smallest;
  return int8_t(std::clamp((bits & kSignBit) ? -magnitude : magnitude, -128, 127));
}

// s = sqrt(v) -> code: x = s * inverse rounded to the nearest code value, but never to 0 unless x
// is 0 (a nonzero x below code 1's range is code 1). Saturates like encode_exp_avg.
inline uint8_t encode_exp_avg_sq_root(float s, float inverse_scale) {
  const float x = s * inverse_scale;
  const int32_t rounded_code = round_to_code(x, kExpAvgSqShift, kExpAvgSqOffset);
  const int32_t smallest = std::bit_cast<uint32_t>(x) != 0 ? 1 : 0;
  return uint8_t(std::min(rounded_code > smallest ? rounded_code : smallest, 255));
}

// Running absmax as MAXPS computes max(a, acc): a NaN `a` leaves acc unchanged.
inline float running_max(float a, float acc) { return a > acc ? a : acc; }

// Gradient i as fp32 (bf16 and fp16 widen exactly).
inline float load_grad(const void* grad, GradType grad_type, int64_t i) {
  switch (grad_type) {
    case GradType::f32: return static_cast<const float*>(grad)[i];
    case GradType::bf16: return bf16_to_float(static_cast<const uint16_t*>(grad)[i]);
    case GradType::f16: return fp16_to_float(static_cast<const uint16_t*>(grad)[i]);
  }
  return 0.0f;
}

// Writes the new master weight p as weight i of the given type (nothing for none).
inline void store_weight(void* weight_out, WeightOutType weight_out_type, int64_t i, float p) {
  if (weight_out_type == WeightOutType::bf16) static_cast<uint16_t*>(weight_out)[i] = float_to_bf16(p);
  if (weight_out_type == WeightOutType::f16) static_cast<uint16_t*>(weight_out)[i] = float_to_fp16(p);
}

// One parameter's AdamW step on its dequantised moments, exactly adamw.h's arithmetic: updates p
// and returns the new m and s = sqrt(v) through m and s.
inline void update_element(const Coefficients& c, float g, float& p, float& m, float& s) {
  if (c.scale) g = rounded(g * c.grad_scale);
  if (c.decay) p = rounded(p * c.decay_factor);
  const float v_old = rounded(s * s);
  m = std::fma(c.one_minus_beta1, g - m, m);
  const float v = std::fma(rounded(c.one_minus_beta2 * g), g, rounded(v_old * c.beta2));
  s = std::sqrt(v);
  const float denom = s / c.bias_correction2_sqrt + c.eps;
  p = p + c.neg_step_size * m / denom;
}

// Writes the codes of `count` new moments (m, s = sqrt(v)) of one block, given their absmaxes,
// and returns the scales to store.
inline void encode_block(const float* m, const float* s, int64_t count, float absmax_m, float absmax_s,
                         int8_t* m_codes, uint8_t* s_codes, float* m_scale, float* s_scale) {
  const BlockScale sm = block_scale(absmax_m), ss = block_scale(absmax_s);
  for (int64_t i = 0; i < count; ++i) {
    m_codes[i] = encode_exp_avg(m[i], sm.inverse);
    s_codes[i] = encode_exp_avg_sq_root(s[i], ss.inverse);
  }
  *m_scale = sm.stored;
  *s_scale = ss.stored;
}

// The whole step of parameters [start + from, start + count) of block `block` (which starts at
// parameter `start`): master and weight_out written, the new m and s kept in new_m[j] / new_s[j],
// their absmaxes folded into absmax_m / absmax_s. The reference's loop over a block, and the SIMD
// paths' over the last count % lanes parameters of a partial block.
inline void update_elements(const Coefficients& c, float* master, const Int8Moments& q, int64_t block, int64_t start,
                            int64_t from, int64_t count, const void* grad, GradType grad_type, void* weight_out,
                            WeightOutType weight_out_type, float* new_m, float* new_s, float& absmax_m,
                            float& absmax_s) {
  const float scale_m = q.exp_avg_scale[block], scale_s = q.exp_avg_sq_scale[block];
  for (int64_t j = from; j < count; ++j) {
    const int64_t i = start + j;
    float p = master[i];
    float m = decode_exp_avg(q.exp_avg[i], scale_m);
    float s = decode_exp_avg_sq_root(q.exp_avg_sq[i], scale_s);
    update_element(c, load_grad(grad, grad_type, i), p, m, s);
    master[i] = p;
    store_weight(weight_out, weight_out_type, i, p);
    new_m[j] = m;
    new_s[j] = s;
    absmax_m = running_max(std::fabs(m), absmax_m);
    absmax_s = running_max(s, absmax_s);
  }
}

// The moments of a range that starts `begin` parameters (a multiple of kInt8MomentBlock) in.
inline Int8Moments offset(const Int8Moments& q, int64_t begin) {
  const int64_t block = begin / kInt8MomentBlock;
  return {q.exp_avg + begin, q.exp_avg_scale + block, q.exp_avg_sq + begin, q.exp_avg_sq_scale + block};
}

// Calls kernel.template operator()<kGrad, kOut>() for the runtime gradient and output types: how
// a SIMD path picks its compiled variant.
template <class Kernel>
void with_types(GradType grad_type, WeightOutType weight_out_type, const Kernel& kernel) {
  auto for_grad = [&]<GradType kGrad>() {
    switch (weight_out_type) {
      case WeightOutType::none: return kernel.template operator()<kGrad, WeightOutType::none>();
      case WeightOutType::bf16: return kernel.template operator()<kGrad, WeightOutType::bf16>();
      case WeightOutType::f16: return kernel.template operator()<kGrad, WeightOutType::f16>();
    }
  };
  switch (grad_type) {
    case GradType::f32: return for_grad.template operator()<GradType::f32>();
    case GradType::bf16: return for_grad.template operator()<GradType::bf16>();
    case GradType::f16: return for_grad.template operator()<GradType::f16>();
  }
}

// Updates parameters [0, n) and the moments' blocks that cover them (n may end mid-block only at
// the end of the state).
using RangeKernel = void (*)(const Coefficients& c, float* master, const Int8Moments& moments,
                             const void* grad, GradType grad_type, void* weight_out,
                             WeightOutType weight_out_type, int64_t n);

void update_range_scalar(const Coefficients& c, float* master, const Int8Moments& moments,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n);
void update_range_avx2(const Coefficients& c, float* master, const Int8Moments& moments,
                       const void* grad, GradType grad_type, void* weight_out,
                       WeightOutType weight_out_type, int64_t n);
void update_range_avx512(const Coefficients& c, float* master, const Int8Moments& moments,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n);

}  // namespace ferry::kernels::adamw_int8_detail
