// AdamW step, AVX2 + FMA + F16C path: 8 parameters per iteration, the last n % 8 by the scalar
// definition (which rounds identically). Compiled with a function-level target attribute, so the
// library needs no special flags and still runs on CPUs without AVX2 (never called there).
#include "kernels/cpu/adamw_internal.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx2_common.h"

namespace ferry::kernels::adamw_detail {
namespace {

using avx2::load_grad;
using avx2::rounded;

template <GradType kGrad, WeightOutType kOut>
FERRY_AVX2 void update(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                       const void* grad, void* weight_out, int64_t n) {
  const avx2::Coefficients8 k(c);
  const int64_t vector_end = n - n % 8;
  for (int64_t i = 0; i < vector_end; i += 8) {
    __m256 g = load_grad<kGrad>(grad, i);
    if (c.scale) g = rounded(_mm256_mul_ps(g, k.grad_scale));
    __m256 p = _mm256_loadu_ps(master + i);
    if (c.decay) p = rounded(_mm256_mul_ps(p, k.decay_factor));
    __m256 m = _mm256_loadu_ps(exp_avg + i);
    m = _mm256_fmadd_ps(k.one_minus_beta1, _mm256_sub_ps(g, m), m);
    __m256 v = _mm256_loadu_ps(exp_avg_sq + i);
    v = _mm256_fmadd_ps(rounded(_mm256_mul_ps(k.one_minus_beta2, g)), g, rounded(_mm256_mul_ps(v, k.beta2)));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), k.bias_correction2_sqrt), k.eps);
    p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(k.neg_step_size, m), denom));
    _mm256_storeu_ps(master + i, p);
    _mm256_storeu_ps(exp_avg + i, m);
    _mm256_storeu_ps(exp_avg_sq + i, v);
    avx2::store_weight_out<kOut>(weight_out, i, p);
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
