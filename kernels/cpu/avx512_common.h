// AVX-512 building blocks of the SIMD AdamW paths (adamw_avx512.cpp, adamw_int8_avx512.cpp): the
// target attribute, whole or masked loads and stores, loading 16 gradients of any GradType as fp32,
// bf16 rounding, the step's coefficients in 16 lanes, and the guard that keeps a product from being
// fused. Functions carry a function-level target attribute, so the library needs no special flags
// and still runs on CPUs without AVX-512 (where these are never called).
#pragma once

#if defined(__x86_64__)
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_ps is `__Y = __Y`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_internal.h"

#define FERRY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace ferry::kernels::avx512 {

// As rounded(float): keeps a product from being fused into the add that uses it.
FERRY_AVX512 inline __m512 rounded(__m512 x) {
  asm("" : "+v"(x));
  return x;
}

// Loads and stores either whole vectors or, for the tail, the lanes in `mask` (masked memory
// operations cost extra on some CPUs, so main loops do without).
template <bool kMasked>
FERRY_AVX512 inline __m512 load(const float* p, __mmask16 mask) {
  if constexpr (kMasked) return _mm512_maskz_loadu_ps(mask, p);
  return _mm512_loadu_ps(p);
}

template <bool kMasked>
FERRY_AVX512 inline void store(float* p, __m512 x, __mmask16 mask) {
  if constexpr (kMasked) {
    _mm512_mask_storeu_ps(p, mask, x);
  } else {
    _mm512_storeu_ps(p, x);
  }
}

template <bool kMasked>
FERRY_AVX512 inline void store16(uint16_t* p, __m256i x, __mmask16 mask) {
  if constexpr (kMasked) {
    _mm256_mask_storeu_epi16(p, mask, x);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
  }
}

// grad[i, i + 16) (or the lanes in `mask`) as fp32: bf16 and fp16 widen exactly.
template <GradType kGrad, bool kMasked = false>
FERRY_AVX512 inline __m512 load_grad(const void* grad, int64_t i, __mmask16 mask = 0xffff) {
  if constexpr (kGrad == GradType::f32) {
    return load<kMasked>(static_cast<const float*>(grad) + i, mask);
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(grad) + i;
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(mask, p) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (kGrad == GradType::bf16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);  // exact, subnormals included
    }
  }
}

// fp32 -> bf16 round-to-nearest-even in integer arithmetic (as float_to_bf16; not VCVTNEPS2BF16,
// which flushes subnormals), NaN to 0x7fc0.
FERRY_AVX512 inline __m256i to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, is_nan, _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}

// The 16-bit copy of 16 (or the masked) new weights p at weight_out[i, ...), if kOut asks for one.
template <WeightOutType kOut, bool kMasked = false>
FERRY_AVX512 inline void store_weight_out(void* weight_out, int64_t i, __m512 p, __mmask16 mask = 0xffff) {
  if constexpr (kOut == WeightOutType::bf16) {
    store16<kMasked>(static_cast<uint16_t*>(weight_out) + i, to_bf16(p), mask);
  } else if constexpr (kOut == WeightOutType::f16) {
    store16<kMasked>(static_cast<uint16_t*>(weight_out) + i,
                     _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), mask);
  }
}

// The step's coefficients (adamw_internal.h) broadcast to 16 lanes.
struct Coefficients16 {
  __m512 grad_scale, decay_factor, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;

  FERRY_AVX512 explicit Coefficients16(const adamw_detail::Coefficients& c)
      : grad_scale(_mm512_set1_ps(c.grad_scale)),
        decay_factor(_mm512_set1_ps(c.decay_factor)),
        one_minus_beta1(_mm512_set1_ps(c.one_minus_beta1)),
        beta2(_mm512_set1_ps(c.beta2)),
        one_minus_beta2(_mm512_set1_ps(c.one_minus_beta2)),
        bias_correction2_sqrt(_mm512_set1_ps(c.bias_correction2_sqrt)),
        eps(_mm512_set1_ps(c.eps)),
        neg_step_size(_mm512_set1_ps(c.neg_step_size)) {}
};

}  // namespace ferry::kernels::avx512

#endif  // __x86_64__
