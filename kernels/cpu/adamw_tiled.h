// What the AdamW wrappers that keep no fp32 master buffer share (adamw_kahan.h: bf16 + Kahan
// compensation; adamw_stochastic.h: bf16 with stochastic rounding): each decodes a tile of master
// weights into an L1-sized fp32 buffer, runs the fp32 (or int8-moment) step on it and encodes it
// back, tiles split across the pool's threads in whole tiles (so int8 moment blocks never straddle
// two threads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels::adamw_tiled {

inline size_t grad_bytes(GradType type) { return type == GradType::f32 ? 4 : 2; }

// One tile's AdamW step on `master` (n parameters starting at `at` of the moment and gradient
// buffers): fp32 moments exp_avg/exp_avg_sq, or int8 `moments` when given.
inline void step_tile(SimdLevel level, const AdamWParams& params, float* master, float* exp_avg, float* exp_avg_sq,
                      const Int8Moments* moments, const void* grad, GradType grad_type, float grad_scale, int64_t at,
                      int64_t n) {
  const void* g = static_cast<const char*>(grad) + at * static_cast<int64_t>(grad_bytes(grad_type));
  if (moments) {
    const int64_t block = at / kInt8MomentBlock;
    const Int8Moments q{moments->exp_avg + at, moments->exp_avg_scale + block, moments->exp_avg_sq + at,
                        moments->exp_avg_sq_scale + block};
    adamw_update_int8_at(level, params, master, q, g, grad_type, grad_scale, nullptr, WeightOutType::none, n);
  } else {
    adamw_update_at(level, params, master, exp_avg + at, exp_avg_sq + at, g, grad_type, grad_scale, nullptr,
                    WeightOutType::none, n);
  }
}

// The definitions' step on a whole decoded master (the wrappers' reference functions): the scalar
// fp32 AdamW, or the int8-moment one when `moments` is given.
inline void step_reference(const AdamWParams& params, float* master, float* exp_avg, float* exp_avg_sq,
                           const Int8Moments* moments, const void* grad, GradType grad_type, float grad_scale,
                           int64_t n) {
  if (moments) {
    adamw_update_int8_reference(params, master, *moments, grad, grad_type, grad_scale, nullptr, WeightOutType::none, n);
  } else {
    adamw_update_reference(params, master, exp_avg, exp_avg_sq, grad, grad_type, grad_scale, nullptr,
                           WeightOutType::none, n);
  }
}

// range(begin, end) over [0, n): on the calling thread below 32 tiles, else on `pool` (the default
// pool when null) in grains of two tiles.
template <class Range>
void for_ranges(int64_t n, int64_t tile, ThreadPool* pool, Range range) {
  if (n < 32 * tile) {
    range(int64_t{0}, n);
    return;
  }
  if (!pool) pool = &default_thread_pool();
  pool->parallel_for(n, 2 * tile, range);
}

}  // namespace ferry::kernels::adamw_tiled
