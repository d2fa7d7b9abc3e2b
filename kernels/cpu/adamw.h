// CpuAdamW: the optimizer step where ZeRO-Offload keeps the optimizer state, in CPU memory.
// One pass over a chunk of n parameters reads the gradient (fp32, bf16 or fp16, optionally
// multiplied by a scale for loss-scale removal and clipping), updates the fp32 master weights and
// both Adam moments in place, and can write the new weights as bf16/fp16 for the copy back to the
// GPU, all in the same pass, so the update moves each byte once and runs at memory speed.
//
// The arithmetic is torch.optim.AdamW(fused=True)'s on CPU (ATen's FusedAdamKernel, ADAMW mode),
// operation for operation, in fp32 with coefficients derived in double:
//   p  = p * (1 - lr*wd)                                   (decoupled weight decay, if wd != 0)
//   m  = fma(1-b1, g - m, m)                               (torch's lerp_: m + (1-b1)*(g - m))
//   v  = fma((1-b2)*g, g, v*b2)                            (v*b2 + (1-b2)*g*g, as torch's build
//                                                           contracts it)
//   p  = p + (-lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// adamw_update_reference is that definition as a plain loop; the SIMD paths reproduce it bit for
// bit. It is bit-identical to ATen's fused kernel's vectorized body (torch 2.11 wheel, checked by
// the tests; ATen's own scalar tail rounds v differently by an ulp) and agrees with
// torch::optim::AdamW (unfused ops, mul+add instead of lerp) to rounding.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace ferry::kernels {

class ThreadPool;

// Hyperparameters in double, like torch's (Python floats, AdamWOptions): the fp32 coefficients
// are derived from them exactly as torch derives them, so a run agrees with torch's given the
// same numbers.
struct AdamWParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  int64_t step = 1;  // 1-based count of updates including this one (bias correction)
};

enum class GradType { f32, bf16, f16 };
enum class WeightOutType { none, bf16, f16 };

// Updates master/exp_avg/exp_avg_sq[0, n) in place from grad[0, n) (of type grad_type; the value
// used is grad * grad_scale, with 1.0f meaning no multiply). If weight_out_type is not none,
// writes the new master weights rounded to nearest-even into weight_out[0, n). Runs the widest
// SIMD path this CPU has (best_simd_level()) on `pool`'s threads (default_thread_pool() when null).
// Buffers must not overlap; any alignment works (64-byte alignment is fastest).
void adamw_update(const AdamWParams& params, float* master, float* exp_avg, float* exp_avg_sq,
                  const void* grad, GradType grad_type, float grad_scale, void* weight_out,
                  WeightOutType weight_out_type, int64_t n, ThreadPool* pool = nullptr);

// The definition: a plain scalar loop on the calling thread.
void adamw_update_reference(const AdamWParams& params, float* master, float* exp_avg,
                            float* exp_avg_sq, const void* grad, GradType grad_type,
                            float grad_scale, void* weight_out, WeightOutType weight_out_type,
                            int64_t n);

// One SIMD path, on the calling thread: for tests (every path on one machine) and for callers that
// do their own threading. Throws InternalError if this CPU cannot run `level`.
void adamw_update_at(SimdLevel level, const AdamWParams& params, float* master, float* exp_avg,
                     float* exp_avg_sq, const void* grad, GradType grad_type, float grad_scale,
                     void* weight_out, WeightOutType weight_out_type, int64_t n);

}  // namespace ferry::kernels
