// CpuAdamW entry points: argument checks, choice of SIMD path, and the split across threads.
#include "kernels/cpu/adamw.h"

#include "core/error.h"
#include "kernels/cpu/adamw_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

using adamw_detail::Coefficients;
using adamw_detail::RangeKernel;

// Threads split the work in ranges of multiples of this many parameters: 16 KB of fp32, so each
// range starts cache-line and SIMD aligned (relative to the buffers) and no two threads write the
// same cache line.
constexpr int64_t kGrain = 4096;
// Below this a second thread costs more (a wake-up, ~10 us) than it saves.
constexpr int64_t kMinParallel = 16 * kGrain;

RangeKernel kernel_for(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return adamw_detail::update_range_scalar;
    case SimdLevel::avx2: return adamw_detail::update_range_avx2;
    case SimdLevel::avx512: return adamw_detail::update_range_avx512;
  }
  return adamw_detail::update_range_scalar;
}

void check_arguments(const float* master, const float* exp_avg, const float* exp_avg_sq,
                     const void* grad, const void* weight_out, WeightOutType weight_out_type,
                     int64_t n) {
  FERRY_CHECK(n >= 0, "adamw_update: n = ", n);
  if (n == 0) return;
  FERRY_CHECK(master && exp_avg && exp_avg_sq && grad, "adamw_update: a null buffer");
  FERRY_CHECK((weight_out != nullptr) == (weight_out_type != WeightOutType::none),
              "adamw_update: weight_out must be given exactly when weight_out_type is not none");
}

size_t grad_element_bytes(GradType type) { return type == GradType::f32 ? 4 : 2; }

}  // namespace

void adamw_update_at(SimdLevel level, const AdamWParams& params, float* master, float* exp_avg,
                     float* exp_avg_sq, const void* grad, GradType grad_type, float grad_scale,
                     void* weight_out, WeightOutType weight_out_type, int64_t n) {
  FERRY_CHECK(cpu_supports(level), "this CPU cannot run the ", simd_level_name(level), " path");
  check_arguments(master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
  if (n == 0) return;
  const Coefficients c = adamw_detail::make_coefficients(params, grad_scale);
  kernel_for(level)(c, master, exp_avg, exp_avg_sq, grad, grad_type, weight_out, weight_out_type, n);
}

void adamw_update(const AdamWParams& params, float* master, float* exp_avg, float* exp_avg_sq,
                  const void* grad, GradType grad_type, float grad_scale, void* weight_out,
                  WeightOutType weight_out_type, int64_t n, ThreadPool* pool) {
  check_arguments(master, exp_avg, exp_avg_sq, grad, weight_out, weight_out_type, n);
  if (n == 0) return;
  const Coefficients c = adamw_detail::make_coefficients(params, grad_scale);
  const RangeKernel kernel = kernel_for(best_simd_level());
  if (n < kMinParallel) {
    kernel(c, master, exp_avg, exp_avg_sq, grad, grad_type, weight_out, weight_out_type, n);
    return;
  }
  if (!pool) pool = &default_thread_pool();
  const size_t grad_bytes = grad_element_bytes(grad_type);
  pool->parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    void* out = weight_out ? static_cast<uint16_t*>(weight_out) + begin : nullptr;
    kernel(c, master + begin, exp_avg + begin, exp_avg_sq + begin,
           static_cast<const char*>(grad) + begin * grad_bytes, grad_type, out, weight_out_type,
           end - begin);
  });
}

}  // namespace ferry::kernels
