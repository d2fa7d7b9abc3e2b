// AdamW step, AVX-512 path: 16 parameters per iteration, the tail through masked loads and
// stores (the same arithmetic instructions). Compiled with a function-level target attribute, so
// the library needs no special flags and still runs on CPUs without AVX-512 (never called there).
#include "kernels/cpu/adamw_internal.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx512_common.h"

namespace ferry::kernels::adamw_detail {
namespace {

using avx512::load;
using avx512::load_grad;
using avx512::rounded;
using avx512::store;
using Vectors = avx512::Coefficients16;

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
  avx512::store_weight_out<kOut, kMasked>(weight_out, i, p, mask);
}

template <GradType kGrad, WeightOutType kOut>
FERRY_AVX512 void update(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, void* weight_out, int64_t n) {
  const Vectors k(c);
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
