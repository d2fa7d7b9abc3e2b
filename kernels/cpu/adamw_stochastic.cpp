// bf16 weights with stochastic rounding around CpuAdamW (see adamw_stochastic.h).
#include "kernels/cpu/adamw_stochastic.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/adamw_tiled.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

static_assert(kStochasticTile % kInt8MomentBlock == 0, "tiles must start on int8 moment blocks");

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// master[0, n) back into weight[0, n) with the random bits of indices first .. first + n - 1.
void encode_stochastic(const float* master, uint16_t* weight, int64_t n, uint64_t seed, int64_t step, int64_t first) {
  for (int64_t i = 0; i < n; ++i) weight[i] = stochastic_bf16(master[i], stochastic_rounding_bits(seed, step, first + i));
}

void update_range(const AdamWParams& params, uint16_t* weight, float* exp_avg, float* exp_avg_sq,
                  const Int8Moments* moments, const void* grad, GradType grad_type, float grad_scale, uint64_t seed,
                  int64_t first, int64_t begin, int64_t end) {
  alignas(64) float master[kStochasticTile];
  const SimdLevel level = best_simd_level();
  for (int64_t at = begin; at < end; at += kStochasticTile) {
    const int64_t n = std::min(kStochasticTile, end - at);
    for (int64_t i = 0; i < n; ++i) master[i] = bf16_to_float(weight[at + i]);
    adamw_tiled::step_tile(level, params, master, exp_avg, exp_avg_sq, moments, grad, grad_type, grad_scale, at, n);
    encode_stochastic(master, weight + at, n, seed, params.step, first + at);
  }
}

void update(const AdamWParams& params, uint16_t* weight, float* exp_avg, float* exp_avg_sq, const Int8Moments* moments,
            const void* grad, GradType grad_type, float grad_scale, int64_t n, uint64_t seed, int64_t first,
            ThreadPool* pool) {
  if (n < 0 || (n > 0 && (!weight || !grad))) throw InternalError("adamw_update_stochastic: null buffer or negative length");
  adamw_tiled::for_ranges(n, kStochasticTile, pool, [&](int64_t begin, int64_t end) {
    update_range(params, weight, exp_avg, exp_avg_sq, moments, grad, grad_type, grad_scale, seed, first, begin, end);
  });
}

}  // namespace

uint16_t stochastic_rounding_bits(uint64_t seed, int64_t step, int64_t index) {
  const uint64_t h = splitmix64(splitmix64(seed ^ 0x5bd1e9955bd1e995ull) + static_cast<uint64_t>(step)) ^
                     static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ull;
  return static_cast<uint16_t>(splitmix64(h) >> 48);
}

uint16_t stochastic_bf16(float x, uint16_t r) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return float_to_bf16(x);  // NaN, infinities
  // Sign-magnitude: adding to the magnitude's low bits and truncating rounds away from zero with
  // probability low / 2^16 for either sign. A carry into the exponent is the next binade's value
  // (the largest finite magnitude may round up to infinity, as any rounding up does).
  return static_cast<uint16_t>((bits + r) >> 16);
}

void adamw_update_stochastic(const AdamWParams& params, uint16_t* weight, float* exp_avg, float* exp_avg_sq,
                             const void* grad, GradType grad_type, float grad_scale, int64_t n, uint64_t seed,
                             int64_t first, ThreadPool* pool) {
  if (n > 0 && (!exp_avg || !exp_avg_sq)) throw InternalError("adamw_update_stochastic: null moment buffer");
  update(params, weight, exp_avg, exp_avg_sq, nullptr, grad, grad_type, grad_scale, n, seed, first, pool);
}

void adamw_update_stochastic_int8(const AdamWParams& params, uint16_t* weight, const Int8Moments& moments,
                                  const void* grad, GradType grad_type, float grad_scale, int64_t n, uint64_t seed,
                                  int64_t first, ThreadPool* pool) {
  update(params, weight, nullptr, nullptr, &moments, grad, grad_type, grad_scale, n, seed, first, pool);
}

void adamw_update_stochastic_reference(const AdamWParams& params, uint16_t* weight, float* exp_avg, float* exp_avg_sq,
                                       const Int8Moments* moments, const void* grad, GradType grad_type,
                                       float grad_scale, int64_t n, uint64_t seed, int64_t first) {
  std::vector<float> master(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) master[static_cast<size_t>(i)] = bf16_to_float(weight[i]);
  adamw_tiled::step_reference(params, master.data(), exp_avg, exp_avg_sq, moments, grad, grad_type, grad_scale, n);
  encode_stochastic(master.data(), weight, n, seed, params.step, first);
}

}  // namespace ferry::kernels
