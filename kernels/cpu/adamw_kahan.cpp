// bf16 + Kahan master weights around CpuAdamW: decode a tile, run the fp32 (or int8-moment) step
// on it, encode it back.
#include "kernels/cpu/adamw_kahan.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/adamw_tiled.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

static_assert(kKahanTile % kInt8MomentBlock == 0, "tiles must start on int8 moment blocks");

// Parameters [begin, end) tile by tile on this thread: exp_avg/exp_avg_sq, or int8 `moments`.
void update_range(const AdamWParams& params, uint16_t* weight, uint16_t* compensation, float* exp_avg,
                  float* exp_avg_sq, const Int8Moments* moments, const void* grad, GradType grad_type,
                  float grad_scale, int64_t begin, int64_t end) {
  alignas(64) float master[kKahanTile];
  const SimdLevel level = best_simd_level();
  for (int64_t at = begin; at < end; at += kKahanTile) {
    const int64_t n = std::min(kKahanTile, end - at);
    decode_kahan_master(weight + at, compensation + at, master, n);
    adamw_tiled::step_tile(level, params, master, exp_avg, exp_avg_sq, moments, grad, grad_type, grad_scale, at, n);
    encode_kahan_master(master, weight + at, compensation + at, n);
  }
}

void update(const AdamWParams& params, uint16_t* weight, uint16_t* compensation, float* exp_avg, float* exp_avg_sq,
            const Int8Moments* moments, const void* grad, GradType grad_type, float grad_scale, int64_t n,
            ThreadPool* pool) {
  if (n < 0 || (n > 0 && (!weight || !compensation || !grad))) {
    throw InternalError("adamw_update_kahan: null buffer or negative length");
  }
  adamw_tiled::for_ranges(n, kKahanTile, pool, [&](int64_t begin, int64_t end) {
    update_range(params, weight, compensation, exp_avg, exp_avg_sq, moments, grad, grad_type, grad_scale, begin,
                 end);
  });
}

}  // namespace

void decode_kahan_master(const uint16_t* weight, const uint16_t* compensation, float* master, int64_t n) {
  for (int64_t i = 0; i < n; ++i) master[i] = bf16_to_float(weight[i]) + bf16_to_float(compensation[i]);
}

void encode_kahan_master(const float* master, uint16_t* weight, uint16_t* compensation, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t w = float_to_bf16(master[i]);
    weight[i] = w;
    compensation[i] = float_to_bf16(master[i] - bf16_to_float(w));
  }
}

void adamw_update_kahan(const AdamWParams& params, uint16_t* weight, uint16_t* compensation, float* exp_avg,
                        float* exp_avg_sq, const void* grad, GradType grad_type, float grad_scale, int64_t n,
                        ThreadPool* pool) {
  if (n > 0 && (!exp_avg || !exp_avg_sq)) throw InternalError("adamw_update_kahan: null moment buffer");
  update(params, weight, compensation, exp_avg, exp_avg_sq, nullptr, grad, grad_type, grad_scale, n, pool);
}

void adamw_update_kahan_int8(const AdamWParams& params, uint16_t* weight, uint16_t* compensation,
                             const Int8Moments& moments, const void* grad, GradType grad_type, float grad_scale,
                             int64_t n, ThreadPool* pool) {
  update(params, weight, compensation, nullptr, nullptr, &moments, grad, grad_type, grad_scale, n, pool);
}

void adamw_update_kahan_reference(const AdamWParams& params, uint16_t* weight, uint16_t* compensation,
                                  float* exp_avg, float* exp_avg_sq, const Int8Moments* moments, const void* grad,
                                  GradType grad_type, float grad_scale, int64_t n) {
  std::vector<float> master(static_cast<size_t>(n));
  decode_kahan_master(weight, compensation, master.data(), n);
  adamw_tiled::step_reference(params, master.data(), exp_avg, exp_avg_sq, moments, grad, grad_type, grad_scale, n);
  encode_kahan_master(master.data(), weight, compensation, n);
}

}  // namespace ferry::kernels
