// The definition of the int8-moment AdamW step: plain scalar code, one block of kInt8MomentBlock
// parameters at a time (dequantise, fp32 AdamW, requantise against the new absmax). The SIMD paths
// must match it bit for bit; it is also the fallback on CPUs without AVX2. Also the conversions
// between fp32 moments and the 8-bit state.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/cpu/adamw_int8_internal.h"

namespace ferry::kernels {
namespace adamw_int8_detail {

void update_range_scalar(const Coefficients& c, float* master, const Int8Moments& q, const void* grad,
                         GradType grad_type, void* weight_out, WeightOutType weight_out_type, int64_t n) {
  float new_m[kInt8MomentBlock], new_s[kInt8MomentBlock];
  for (int64_t start = 0, block = 0; start < n; start += kInt8MomentBlock, ++block) {
    const int64_t count = std::min(kInt8MomentBlock, n - start);
    float absmax_m = 0.0f, absmax_s = 0.0f;
    update_elements(c, master, q, block, start, 0, count, grad, grad_type, weight_out, weight_out_type, new_m, new_s,
                    absmax_m, absmax_s);
    encode_block(new_m, new_s, count, absmax_m, absmax_s, q.exp_avg + start, q.exp_avg_sq + start,
                 q.exp_avg_scale + block, q.exp_avg_sq_scale + block);
  }
}

}  // namespace adamw_int8_detail

using namespace adamw_int8_detail;

void zero_int8_moments(const Int8Moments& q, int64_t n) {
  FERRY_CHECK(n >= 0, "zero_int8_moments: n = ", n);
  if (n == 0) return;
  FERRY_CHECK(q.exp_avg && q.exp_avg_scale && q.exp_avg_sq && q.exp_avg_sq_scale, "zero_int8_moments: a null buffer");
  const int64_t blocks = int8_moment_blocks(n);
  std::memset(q.exp_avg, 0, size_t(n));
  std::memset(q.exp_avg_sq, 0, size_t(n));
  std::fill(q.exp_avg_scale, q.exp_avg_scale + blocks, 0.0f);
  std::fill(q.exp_avg_sq_scale, q.exp_avg_sq_scale + blocks, 0.0f);
}

void quantize_int8_moments(const float* exp_avg, const float* exp_avg_sq, const Int8Moments& q, int64_t n) {
  FERRY_CHECK(n >= 0, "quantize_int8_moments: n = ", n);
  if (n == 0) return;
  FERRY_CHECK(exp_avg && exp_avg_sq && q.exp_avg && q.exp_avg_scale && q.exp_avg_sq && q.exp_avg_sq_scale,
              "quantize_int8_moments: a null buffer");
  float s[kInt8MomentBlock];
  for (int64_t start = 0, block = 0; start < n; start += kInt8MomentBlock, ++block) {
    const int64_t count = std::min(kInt8MomentBlock, n - start);
    float absmax_m = 0.0f, absmax_s = 0.0f;
    for (int64_t j = 0; j < count; ++j) {
      s[j] = std::sqrt(exp_avg_sq[start + j]);
      absmax_m = running_max(std::fabs(exp_avg[start + j]), absmax_m);
      absmax_s = running_max(s[j], absmax_s);
    }
    encode_block(exp_avg + start, s, count, absmax_m, absmax_s, q.exp_avg + start, q.exp_avg_sq + start,
                 q.exp_avg_scale + block, q.exp_avg_sq_scale + block);
  }
}

void dequantize_int8_moments(const Int8Moments& q, float* exp_avg, float* exp_avg_sq, int64_t n) {
  FERRY_CHECK(n >= 0, "dequantize_int8_moments: n = ", n);
  if (n == 0) return;
  FERRY_CHECK(exp_avg && exp_avg_sq && q.exp_avg && q.exp_avg_scale && q.exp_avg_sq && q.exp_avg_sq_scale,
              "dequantize_int8_moments: a null buffer");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = i / kInt8MomentBlock;
    exp_avg[i] = decode_exp_avg(q.exp_avg[i], q.exp_avg_scale[block]);
    const float s = decode_exp_avg_sq_root(q.exp_avg_sq[i], q.exp_avg_sq_scale[block]);
    exp_avg_sq[i] = rounded(s * s);
  }
}

void adamw_update_int8_reference(const AdamWParams& params, float* master, const Int8Moments& moments,
                                 const void* grad, GradType grad_type, float grad_scale, void* weight_out,
                                 WeightOutType weight_out_type, int64_t n) {
  adamw_update_int8_at(SimdLevel::scalar, params, master, moments, grad, grad_type, grad_scale, weight_out,
                       weight_out_type, n);
}

}  // namespace ferry::kernels
