// CpuAdamW on bf16 weights without a master copy (offload.master_weights: bf16_stochastic, issue
// 39's first part): the host keeps only the bf16 weights the GPU gets (2 bytes per parameter,
// against 4 for bf16_kahan and 6 for an fp32 master), and each update is rounded back to bf16
// stochastically, so that an update far below a bf16 ulp still moves the weight by the right
// amount on average (E[round(x)] = x) instead of rounding away.
//
// One step, per tile of kStochasticTile parameters:
//   master = f32(w);  AdamW on master, exp_avg, exp_avg_sq (adamw.h's fp32 step, or adamw_int8.h's)
//   w = stochastic_bf16(master, r_i), r_i = 16 bits of a counter-based hash of (seed, step, i)
// stochastic_bf16 adds r to the 16 bits below bf16's mantissa and truncates: it rounds away from
// zero with probability (those bits) / 2^16, i.e. unbiasedly; NaN and infinities are kept. The
// random bits depend only on (seed, step, the parameter's index in the buffer), never on threads
// or tiles, so a run is reproducible and a resumed one (same seed and step count) exact.
// adamw_update_stochastic_reference is the definition on the calling thread.
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"

namespace ferry::kernels {

class ThreadPool;

// Parameters per update tile: a multiple of kInt8MomentBlock.
inline constexpr int64_t kStochasticTile = 2048;

// The 16 random bits of parameter `index` at `step` of a run seeded `seed`.
uint16_t stochastic_rounding_bits(uint64_t seed, int64_t step, int64_t index);

// f32 -> bf16 rounding away from zero with probability (the low 16 bits of x) / 2^16, given 16
// random bits `r`; NaN and infinities as round-to-nearest-even keeps them.
uint16_t stochastic_bf16(float x, uint16_t r);

// One AdamW step of n bf16 weights (`weight`, bit patterns, updated in place) with fp32 moments;
// `first` is the index of weight[0] in its buffer (the random bits follow the buffer's indices).
void adamw_update_stochastic(const AdamWParams& params, uint16_t* weight, float* exp_avg, float* exp_avg_sq,
                             const void* grad, GradType grad_type, float grad_scale, int64_t n, uint64_t seed,
                             int64_t first = 0, ThreadPool* pool = nullptr);
// The same with 8-bit moments (adamw_int8.h).
void adamw_update_stochastic_int8(const AdamWParams& params, uint16_t* weight, const Int8Moments& moments,
                                  const void* grad, GradType grad_type, float grad_scale, int64_t n, uint64_t seed,
                                  int64_t first = 0, ThreadPool* pool = nullptr);

// The definition, on the calling thread (exactly one of exp_avg/exp_avg_sq and moments is used).
void adamw_update_stochastic_reference(const AdamWParams& params, uint16_t* weight, float* exp_avg, float* exp_avg_sq,
                                       const Int8Moments* moments, const void* grad, GradType grad_type,
                                       float grad_scale, int64_t n, uint64_t seed, int64_t first = 0);

}  // namespace ferry::kernels
