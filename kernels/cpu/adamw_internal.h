// Shared by the AdamW paths (reference, AVX2, AVX-512): the fp32 coefficients of one step, and
// the per-path entry points that update one contiguous range on the calling thread.
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"

namespace ferry::kernels::adamw_detail {

// Everything a step multiplies by, rounded to fp32 the way torch's fused kernel rounds it
// (derived in double, then cast), so every path uses identical constants.
struct Coefficients {
  bool decay = false;         // weight_decay != 0
  float decay_factor = 1.0f;  // 1 - lr*wd
  bool scale = false;         // grad_scale != 1
  float grad_scale = 1.0f;
  float one_minus_beta1 = 0.1f;  // the lerp weight
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - b2^t)
  float eps = 1e-8f;
  float neg_step_size = -1e-3f;  // -lr / (1 - b1^t)
};

Coefficients make_coefficients(const AdamWParams& params, float grad_scale);

// Updates [0, n) of the given arrays; weight_out and grad are typed by the enums.
using RangeKernel = void (*)(const Coefficients& c, float* master, float* exp_avg,
                             float* exp_avg_sq, const void* grad, GradType grad_type,
                             void* weight_out, WeightOutType weight_out_type, int64_t n);

void update_range_scalar(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n);
void update_range_avx2(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                       const void* grad, GradType grad_type, void* weight_out,
                       WeightOutType weight_out_type, int64_t n);
void update_range_avx512(const Coefficients& c, float* master, float* exp_avg, float* exp_avg_sq,
                         const void* grad, GradType grad_type, void* weight_out,
                         WeightOutType weight_out_type, int64_t n);

}  // namespace ferry::kernels::adamw_detail

namespace ferry::kernels::adamw_detail {

// Returns x unchanged but opaque to the optimizer, so a multiply whose result feeds an add is not
// fused into one FMA (GCC contracts by default in C++, and only where the target has FMA), which
// would round differently on different paths. Costs no instruction. The SIMD files define the
// same for their vector types.
inline float rounded(float x) {
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(x));
#endif
  return x;
}

}  // namespace ferry::kernels::adamw_detail
