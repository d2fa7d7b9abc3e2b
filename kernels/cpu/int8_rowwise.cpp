// Row-wise int8 quantisation, scalar definitions (see int8_rowwise.h).
#include "kernels/cpu/int8_rowwise.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/half_convert.h"

namespace ferry::kernels {
namespace {

float load(const void* w, Nf4ValueType type, int64_t i) {
  switch (type) {
    case Nf4ValueType::f32: return static_cast<const float*>(w)[i];
    case Nf4ValueType::bf16: return bf16_to_float(static_cast<const uint16_t*>(w)[i]);
    case Nf4ValueType::f16: return fp16_to_float(static_cast<const uint16_t*>(w)[i]);
  }
  return 0.0f;
}

void store(void* out, Nf4ValueType type, int64_t i, float v) {
  switch (type) {
    case Nf4ValueType::f32: static_cast<float*>(out)[i] = v; break;
    case Nf4ValueType::bf16: static_cast<uint16_t*>(out)[i] = float_to_bf16(v); break;
    case Nf4ValueType::f16: static_cast<uint16_t*>(out)[i] = float_to_fp16(v); break;
  }
}

}  // namespace

void int8_rowwise_quantize_reference(const void* w, Nf4ValueType type, int64_t rows, int64_t cols, int8_t* cb,
                                     float* scb) {
  FERRY_CHECK(rows >= 0 && cols >= 0, "int8_rowwise_quantize_reference: negative size");
  FERRY_CHECK(rows * cols == 0 || (w != nullptr && cb != nullptr && scb != nullptr),
              "int8_rowwise_quantize_reference: null buffer");
  for (int64_t r = 0; r < rows; ++r) {
    float absmax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) absmax = std::fmax(absmax, std::fabs(load(w, type, r * cols + c)));
    scb[r] = absmax;
    const float scale = (1.0f / absmax) * 127.0f;  // inf for a zero row
    for (int64_t c = 0; c < cols; ++c) {
      const float v = load(w, type, r * cols + c) * scale;
      cb[r * cols + c] = absmax == 0.0f ? int8_t(0) : static_cast<int8_t>(std::nearbyint(v));
    }
  }
}

void int8_rowwise_dequantize_reference(const int8_t* cb, const float* scb, int64_t rows, int64_t cols, void* out,
                                       Nf4ValueType out_type) {
  FERRY_CHECK(rows >= 0 && cols >= 0, "int8_rowwise_dequantize_reference: negative size");
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = scb[r] * kInt8InverseScale;
    for (int64_t c = 0; c < cols; ++c) store(out, out_type, r * cols + c, float(cb[r * cols + c]) * scale);
  }
}

}  // namespace ferry::kernels
