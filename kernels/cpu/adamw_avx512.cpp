// AdamW step, AVX-512 path: 16 parameters per iteration, the tail through masked loads and
// stores (the same arithmetic instructions). Compiled with a function-level target attribute, so
// the library needs no special flags and still runs on CPUs without AVX-512 (never called there).
#include "kernels/cpu/adamw_internal.h"

#if defined(__x86_64__)
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_ps is `__Y = __Y`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define FERRY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace ferry::kernels::adamw_detail {
namespace {

// As rounded(float): keeps a product from being fused into the add that uses it.
FERRY_AVX512 inline __m512 rounded(__m512 x) {
  asm("" : "+v"(x));
  return x;
}

// Loads and stores either whole vectors or, for the tail, the lanes in `mask` (masked memory
// operations cost extra on some CPUs, so the main loop does without).
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

template <GradType kGrad, bool kMasked>
FERRY_AVX512 inline __m512 load_grad(const void* grad, int64_t i, __mmask16 mask) {
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

// The coefficients, broadcast once per call.
struct Vectors {
  __m512 grad_scale, decay_factor, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};

// Updates the 16 (or, masked, fewer) parameters at i.
template <GradType kGrad, WeightOutType kOut, bool kMasked>
FERRY_AVX512 inline void update_vector(const Coefficients& c, const Vectors& k, float* master, float* exp_avg,
                                       float* exp_avg_sq, const void* grad, void* weight_out, int64_t i,
                                       __mmask16 mask) {
  __m512 g = load_grad<kGrad, kMasked>(grad, i, mask);
  if (c.scale) g = rounded(_mm512_mul_ps(g, k.grad_scale));
  __m512 p = load<kMasked>(master + i, mask);
  if (c.decay) p = rounded(_mm512_mul_ps(p, k.decay_factor));
  __m512 m = load<kMasked>(exp_avg + i, mask);
  m = _mm512_fmadd_ps(k.one_minus_beta1, _mm512_sub_ps(g, m), m);
  __m512 v = load<kMasked>(exp_avg_sq + i, mask);
  v = _mm512_fmadd_ps(rounded(_mm512_mul_ps(k.one_minus_beta2, g)), g, rounded(_mm512_mul_ps(v, k.beta2)));
  const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), k.bias_correction2_sqrt), k.eps);
  p = _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(k.neg_step_size, m), denom));
  store<kMasked>(master + i, p, mask);
  store<kMasked>(exp_avg + i, m, mask);
  store<kMasked>(exp_avg_sq + i, v, mask);
  if constexpr (kOut == WeightOutType::bf16) {
    store16<kMasked>(static_cast<uint16_t*>(weight_out) + i, to_bf16(p), mask);
  } else if constexpr (kOut == WeightOutType::f16) {
    store16<kMasked>(static_cast<uint16_t*>(weight_out) + i,
                     _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), mask);
  }
}

template <GradType kGrad, WeightOutType kOut>
FERRY_AVX512 void update(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, void* weight_out, int64_t n) {
  const Vectors k{_mm512_set1_ps(c.grad_scale),      _mm512_set1_ps(c.decay_factor),
                  _mm512_set1_ps(c.one_minus_beta1), _mm512_set1_ps(c.beta2),
                  _mm512_set1_ps(c.one_minus_beta2), _mm512_set1_ps(c.bias_correction2_sqrt),
                  _mm512_set1_ps(c.eps),             _mm512_set1_ps(c.neg_step_size)};
  const int64_t vector_end = n - n % 16;
  for (int64_t i = 0; i < vector_end; i += 16) {
    update_vector<kGrad, kOut, false>(c, k, master, exp_avg, exp_avg_sq, grad, weight_out, i, 0xffff);
  }
  if (vector_end < n) {
    const __mmask16 mask = __mmask16((1u << (n - vector_end)) - 1);
    update_vector<kGrad, kOut, true>(c, k, master, exp_avg, exp_avg_sq, grad, weight_out, vector_end, mask);
  }
}

template <GradType kGrad>
void update_for_grad(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                     const void* grad, void* weight_out, WeightOutType weight_out_type, int64_t n) {
  switch (weight_out_type) {
    case WeightOutType::none: return update<kGrad, WeightOutType::none>(c, master, exp_avg, exp_avg_sq, grad, weight_out, n);
    case WeightOutType::bf16: return update<kGrad, WeightOutType::bf16>(c, master, exp_avg, exp_avg_sq, grad, weight_out, n);
    case WeightOutType::f16: return update<kGrad, WeightOutType::f16>(c, master, exp_avg, exp_avg_sq, grad, weight_out, n);
  }
}

}  // namespace

void update_range_avx512(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n) {
  switch (grad_type) {
    case GradType::f32: return update_for_grad<GradType::f32>(c, master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
    case GradType::bf16: return update_for_grad<GradType::bf16>(c, master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
    case GradType::f16: return update_for_grad<GradType::f16>(c, master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
  }
}

}  // namespace ferry::kernels::adamw_detail

#else  // not x86-64: never selected (cpu_supports(avx512) is false), kept only so the symbol exists.

namespace ferry::kernels::adamw_detail {
void update_range_avx512(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n) {
  update_range_scalar(c, master, exp_avg, exp_avg_sq, grad, grad_type, weight_out, weight_out_type, n);
}
}  // namespace ferry::kernels::adamw_detail

#endif
