// AdamW step, AVX2 + FMA + F16C path: 8 parameters per iteration, the last n % 8 by the scalar
// definition (which rounds identically). Compiled with a function-level target attribute, so the
// library needs no special flags and still runs on CPUs without AVX2 (never called there).
#include "kernels/cpu/adamw_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define FERRY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace ferry::kernels::adamw_detail {
namespace {

// As rounded(float): keeps a product from being fused into the add that uses it.
FERRY_AVX2 inline __m256 rounded(__m256 x) {
  asm("" : "+x"(x));
  return x;
}

template <GradType kGrad>
FERRY_AVX2 inline __m256 load_grad(const void* grad, int64_t i) {
  if constexpr (kGrad == GradType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(grad) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(grad) + i));
    if constexpr (kGrad == GradType::bf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);  // exact, subnormals included
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

template <GradType kGrad, WeightOutType kOut>
FERRY_AVX2 void update(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                       const void* grad, void* weight_out, int64_t n) {
  const __m256 grad_scale = _mm256_set1_ps(c.grad_scale);
  const __m256 decay_factor = _mm256_set1_ps(c.decay_factor);
  const __m256 one_minus_beta1 = _mm256_set1_ps(c.one_minus_beta1);
  const __m256 beta2 = _mm256_set1_ps(c.beta2);
  const __m256 one_minus_beta2 = _mm256_set1_ps(c.one_minus_beta2);
  const __m256 bias_correction2_sqrt = _mm256_set1_ps(c.bias_correction2_sqrt);
  const __m256 eps = _mm256_set1_ps(c.eps);
  const __m256 neg_step_size = _mm256_set1_ps(c.neg_step_size);
  const int64_t vector_end = n - n % 8;
  for (int64_t i = 0; i < vector_end; i += 8) {
    __m256 g = load_grad<kGrad>(grad, i);
    if (c.scale) g = rounded(_mm256_mul_ps(g, grad_scale));
    __m256 p = _mm256_loadu_ps(master + i);
    if (c.decay) p = rounded(_mm256_mul_ps(p, decay_factor));
    __m256 m = _mm256_loadu_ps(exp_avg + i);
    m = _mm256_fmadd_ps(one_minus_beta1, _mm256_sub_ps(g, m), m);
    __m256 v = _mm256_loadu_ps(exp_avg_sq + i);
    v = _mm256_fmadd_ps(rounded(_mm256_mul_ps(one_minus_beta2, g)), g, rounded(_mm256_mul_ps(v, beta2)));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bias_correction2_sqrt), eps);
    p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_step_size, m), denom));
    _mm256_storeu_ps(master + i, p);
    _mm256_storeu_ps(exp_avg + i, m);
    _mm256_storeu_ps(exp_avg_sq + i, v);
    if constexpr (kOut == WeightOutType::bf16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(weight_out) + i), to_bf16(p));
    } else if constexpr (kOut == WeightOutType::f16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(weight_out) + i),
                       _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
  if (vector_end == n) return;
  const size_t grad_bytes = kGrad == GradType::f32 ? 4 : 2;
  update_range_scalar(c, master + vector_end, exp_avg + vector_end, exp_avg_sq + vector_end,
                      static_cast<const char*>(grad) + vector_end * grad_bytes, kGrad,
                      kOut == WeightOutType::none ? nullptr : static_cast<uint16_t*>(weight_out) + vector_end,
                      kOut, n - vector_end);
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

void update_range_avx2(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                       const void* grad, GradType grad_type, void* weight_out,
                       WeightOutType weight_out_type, int64_t n) {
  switch (grad_type) {
    case GradType::f32: return update_for_grad<GradType::f32>(c, master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
    case GradType::bf16: return update_for_grad<GradType::bf16>(c, master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
    case GradType::f16: return update_for_grad<GradType::f16>(c, master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
  }
}

}  // namespace ferry::kernels::adamw_detail

#else  // not x86-64: never selected (cpu_supports(avx2) is false), kept only so the symbol exists.

namespace ferry::kernels::adamw_detail {
void update_range_avx2(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                       const void* grad, GradType grad_type, void* weight_out,
                       WeightOutType weight_out_type, int64_t n) {
  update_range_scalar(c, master, exp_avg, exp_avg_sq, grad, grad_type, weight_out, weight_out_type, n);
}
}  // namespace ferry::kernels::adamw_detail

#endif
