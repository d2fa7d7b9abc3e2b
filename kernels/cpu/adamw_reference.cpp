// The definition of Ferry's AdamW step: plain scalar code, one element at a time. The SIMD paths
// must match it bit for bit; it is also the fallback on CPUs without AVX2.
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/adamw_internal.h"
#include "kernels/cpu/half_convert.h"

namespace ferry::kernels {
namespace adamw_detail {

Coefficients make_coefficients(const AdamWParams& p, float grad_scale) {
  FERRY_CHECK(p.step >= 1, "AdamW step is 1-based, got ", p.step);
  // As ATen's fused AdamW: bias corrections and step size in double, each cast to fp32 once.
  const double bias_correction1 = 1 - std::pow(p.beta1, double(p.step));
  const double bias_correction2 = 1 - std::pow(p.beta2, double(p.step));
  Coefficients c;
  c.decay = p.weight_decay != 0;
  c.decay_factor = float(1 - p.lr * p.weight_decay);
  c.scale = grad_scale != 1.0f;
  c.grad_scale = grad_scale;
  c.one_minus_beta1 = float(1 - p.beta1);
  c.beta2 = float(p.beta2);
  c.one_minus_beta2 = float(1 - p.beta2);
  c.bias_correction2_sqrt = float(std::sqrt(bias_correction2));
  c.eps = float(p.eps);
  c.neg_step_size = float(-(p.lr / bias_correction1));
  // ATen picks lerp's other formula for weights >= 0.5 (beta1 <= 0.5); Ferry implements the
  // usual case only, and says so rather than silently differing.
  FERRY_CHECK(std::abs(c.one_minus_beta1) < 0.5f, "AdamW beta1 must be > 0.5, got ", p.beta1);
  return c;
}

void update_range_scalar(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad_type == GradType::f32    ? static_cast<const float*>(grad)[i]
              : grad_type == GradType::bf16 ? bf16_to_float(static_cast<const uint16_t*>(grad)[i])
                                            : fp16_to_float(static_cast<const uint16_t*>(grad)[i]);
    if (c.scale) g = rounded(g * c.grad_scale);
    float p = master[i];
    if (c.decay) p = rounded(p * c.decay_factor);
    const float m = std::fma(c.one_minus_beta1, g - exp_avg[i], exp_avg[i]);
    const float v = std::fma(rounded(c.one_minus_beta2 * g), g, rounded(exp_avg_sq[i] * c.beta2));
    const float denom = std::sqrt(v) / c.bias_correction2_sqrt + c.eps;
    p = p + c.neg_step_size * m / denom;
    master[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (weight_out_type == WeightOutType::bf16) static_cast<uint16_t*>(weight_out)[i] = float_to_bf16(p);
    if (weight_out_type == WeightOutType::f16) static_cast<uint16_t*>(weight_out)[i] = float_to_fp16(p);
  }
}

}  // namespace adamw_detail

void adamw_update_reference(const AdamWParams& params, float* master, float* exp_avg,
                            float* exp_avg_sq, const void* grad, GradType grad_type,
                            float grad_scale, void* weight_out, WeightOutType weight_out_type,
                            int64_t n) {
  adamw_update_at(SimdLevel::scalar, params, master, exp_avg, exp_avg_sq, grad, grad_type,
                  grad_scale, weight_out, weight_out_type, n);
}

}  // namespace ferry::kernels
