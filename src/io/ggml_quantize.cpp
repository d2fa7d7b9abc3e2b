// ggml tensor types from torch tensors (see ggml_quantize.h).
#include "src/io/ggml_quantize.h"

#include <ATen/ATen.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace ferry::io {

void quantize_q8_0(const float* x, int64_t n, uint8_t* out) {
  FERRY_CHECK(n % kQ8_0BlockSize == 0, "Q8_0 needs a multiple of 32 values, got ", n);
  for (int64_t block = 0; block < n / kQ8_0BlockSize; ++block) {
    const float* v = x + block * kQ8_0BlockSize;
    uint8_t* y = out + block * kQ8_0BlockBytes;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d_bits = c10::Half(d).x;  // fp32 -> fp16, round to nearest even
    std::memcpy(y, &d_bits, sizeof(d_bits));
    for (int64_t j = 0; j < kQ8_0BlockSize; ++j) {
      const auto q = static_cast<int8_t>(std::round(v[j] * id));  // halves away from zero, as roundf
      std::memcpy(y + 2 + j, &q, 1);
    }
  }
}

at::Tensor to_ggml(const at::Tensor& tensor, GgmlType type) {
  FERRY_CHECK(tensor.device().is_cpu() && tensor.is_floating_point(), "to_ggml takes a floating-point CPU tensor");
  switch (type) {
    case GgmlType::f32: return tensor.to(at::kFloat).contiguous();
    case GgmlType::f16: return tensor.to(at::kFloat).to(at::kHalf).contiguous();
    case GgmlType::bf16: return tensor.to(at::kFloat).to(at::kBFloat16).contiguous();
    case GgmlType::q8_0: {
      FERRY_CHECK(tensor.dim() >= 1 && tensor.size(-1) % kQ8_0BlockSize == 0,
                  "Q8_0 rows must be a multiple of 32 values, got shape ", tensor.sizes());
      const at::Tensor values = tensor.to(at::kFloat).contiguous();
      at::Tensor out = at::empty({static_cast<int64_t>(ggml_nbytes(type, values.numel()))}, at::kByte);
      quantize_q8_0(values.data_ptr<float>(), values.numel(), out.data_ptr<uint8_t>());
      return out;
    }
    default: break;
  }
  FERRY_CHECK(false, "Ferry writes F32, F16, BF16 and Q8_0, not ", ggml_type_name(type));
  return {};
}

}  // namespace ferry::io
