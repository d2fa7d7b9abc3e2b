// AVX2 building blocks of the SIMD AdamW paths (adamw_avx2.cpp, adamw_int8_avx2.cpp): the target
// attribute, loading 8 gradients of any GradType as fp32, bf16 rounding, and the guard that keeps
// a product from being fused. Functions carry a function-level target attribute, so the library
// needs no special flags and still runs on CPUs without AVX2 (where these are never called).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_internal.h"

#define FERRY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace ferry::kernels::avx2 {

// As rounded(float): keeps a product from being fused into the add that uses it.
FERRY_AVX2 inline __m256 rounded(__m256 x) {
  asm("" : "+x"(x));
  return x;
}

// grad[i, i + 8) as fp32 (bf16 and fp16 widen exactly, subnormals included).
template <GradType kGrad>
FERRY_AVX2 inline __m256 load_grad(const void* grad, int64_t i) {
  if constexpr (kGrad == GradType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(grad) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(grad) + i));
    if constexpr (kGrad == GradType::bf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// fp32 -> bf16 round-to-nearest-even in integer arithmetic (as float_to_bf16), NaN to 0x7fc0.
FERRY_AVX2 inline __m128i to_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), is_nan);
  // Values fit in 16 bits, so the saturating pack is a plain narrowing, in order.
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// The step's coefficients (adamw_internal.h) broadcast to 8 lanes.
struct Coefficients8 {
  __m256 grad_scale, decay_factor, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;

  FERRY_AVX2 explicit Coefficients8(const adamw_detail::Coefficients& c)
      : grad_scale(_mm256_set1_ps(c.grad_scale)),
        decay_factor(_mm256_set1_ps(c.decay_factor)),
        one_minus_beta1(_mm256_set1_ps(c.one_minus_beta1)),
        beta2(_mm256_set1_ps(c.beta2)),
        one_minus_beta2(_mm256_set1_ps(c.one_minus_beta2)),
        bias_correction2_sqrt(_mm256_set1_ps(c.bias_correction2_sqrt)),
        eps(_mm256_set1_ps(c.eps)),
        neg_step_size(_mm256_set1_ps(c.neg_step_size)) {}
};

// The 16-bit copy of 8 new weights p at weight_out[i, i + 8), if kOut asks for one.
template <WeightOutType kOut>
FERRY_AVX2 inline void store_weight_out(void* weight_out, int64_t i, __m256 p) {
  if constexpr (kOut == WeightOutType::bf16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(weight_out) + i), to_bf16(p));
  } else if constexpr (kOut == WeightOutType::f16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(weight_out) + i),
                     _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

}  // namespace ferry::kernels::avx2

#endif  // __x86_64__
