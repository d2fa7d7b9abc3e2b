// Int8-moment CpuAdamW entry points: argument checks, choice of SIMD path, and the split across
// threads on block boundaries.
#include "kernels/cpu/adamw_int8.h"

#include "core/error.h"
#include "kernels/cpu/adamw_int8_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

using adamw_int8_detail::Coefficients;
using adamw_int8_detail::RangeKernel;

// Threads take ranges of multiples of this many parameters, as the fp32 kernel does: 16 whole
// blocks, so no two threads share a block, a scale or (with 64-byte aligned buffers) a cache line.
constexpr int64_t kGrain = 4096;
static_assert(kGrain % kInt8MomentBlock == 0, "ranges must start on block boundaries");
// Below this a second thread costs more (a wake-up, ~10 us) than it saves.
constexpr int64_t kMinParallel = 16 * kGrain;

RangeKernel kernel_for(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return adamw_int8_detail::update_range_scalar;
    case SimdLevel::avx2: return adamw_int8_detail::update_range_avx2;
    case SimdLevel::avx512: return adamw_int8_detail::update_range_avx512;
  }
  return adamw_int8_detail::update_range_scalar;
}

void check_arguments(const float* master, const Int8Moments& q, const void* grad, const void* weight_out,
                     WeightOutType weight_out_type, int64_t n) {
  FERRY_CHECK(n >= 0, "adamw_update_int8: n = ", n);
  if (n == 0) return;
  FERRY_CHECK(master && q.exp_avg && q.exp_avg_scale && q.exp_avg_sq && q.exp_avg_sq_scale && grad,
              "adamw_update_int8: a null buffer");
  FERRY_CHECK((weight_out != nullptr) == (weight_out_type != WeightOutType::none),
              "adamw_update_int8: weight_out must be given exactly when weight_out_type is not none");
}

size_t grad_element_bytes(GradType type) { return type == GradType::f32 ? 4 : 2; }

}  // namespace

void adamw_update_int8_at(SimdLevel level, const AdamWParams& params, float* master, const Int8Moments& moments,
                          const void* grad, GradType grad_type, float grad_scale, void* weight_out,
                          WeightOutType weight_out_type, int64_t n) {
  FERRY_CHECK(cpu_supports(level), "this CPU cannot run the ", simd_level_name(level), " path");
  check_arguments(master, moments, grad, weight_out, weight_out_type, n);
  if (n == 0) return;
  const Coefficients c = adamw_detail::make_coefficients(params, grad_scale);
  kernel_for(level)(c, master, moments, grad, grad_type, weight_out, weight_out_type, n);
}

void adamw_update_int8(const AdamWParams& params, float* master, const Int8Moments& moments, const void* grad,
                       GradType grad_type, float grad_scale, void* weight_out, WeightOutType weight_out_type,
                       int64_t n, ThreadPool* pool) {
  check_arguments(master, moments, grad, weight_out, weight_out_type, n);
  if (n == 0) return;
  const Coefficients c = adamw_detail::make_coefficients(params, grad_scale);
  const RangeKernel kernel = kernel_for(best_simd_level());
  if (n < kMinParallel) {
    kernel(c, master, moments, grad, grad_type, weight_out, weight_out_type, n);
    return;
  }
  if (!pool) pool = &default_thread_pool();
  const size_t grad_bytes = grad_element_bytes(grad_type);
  pool->parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    void* out = weight_out ? static_cast<uint16_t*>(weight_out) + begin : nullptr;
    kernel(c, master + begin, adamw_int8_detail::offset(moments, begin),
           static_cast<const char*>(grad) + begin * grad_bytes, grad_type, out, weight_out_type, end - begin);
  });
}

}  // namespace ferry::kernels
