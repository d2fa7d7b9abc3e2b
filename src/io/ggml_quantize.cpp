// ggml tensor types from torch tensors (see ggml_quantize.h).
#include "src/io/ggml_quantize.h"

#include <ATen/ATen.h>

#include <optional>

#include "core/error.h"
#include "kernels/cpu/ggml_quantize.h"

namespace ferry::io {
namespace {

// The kernel's name for a ggml block type, or nothing for f32 / f16 / bf16 and types Ferry reads only.
std::optional<kernels::GgmlQuantType> quant_type(GgmlType type) {
  switch (type) {
    case GgmlType::q4_0: return kernels::GgmlQuantType::q4_0;
    case GgmlType::q5_0: return kernels::GgmlQuantType::q5_0;
    case GgmlType::q5_1: return kernels::GgmlQuantType::q5_1;
    case GgmlType::q8_0: return kernels::GgmlQuantType::q8_0;
    case GgmlType::q4_k: return kernels::GgmlQuantType::q4_k;
    case GgmlType::q5_k: return kernels::GgmlQuantType::q5_k;
    case GgmlType::q6_k: return kernels::GgmlQuantType::q6_k;
    default: return std::nullopt;
  }
}

}  // namespace

void quantize_q8_0(const float* x, int64_t n, uint8_t* out) {
  FERRY_CHECK(n % kQ8_0BlockSize == 0, "Q8_0 needs a multiple of 32 values, got ", n);
  kernels::ggml_quantize_reference(kernels::GgmlQuantType::q8_0, x, n, out);
}

bool ggml_type_writable(GgmlType type) {
  return type == GgmlType::f32 || type == GgmlType::f16 || type == GgmlType::bf16 || quant_type(type).has_value();
}

at::Tensor to_ggml(const at::Tensor& tensor, GgmlType type) {
  FERRY_CHECK(tensor.device().is_cpu() && tensor.is_floating_point(), "to_ggml takes a floating-point CPU tensor");
  switch (type) {
    case GgmlType::f32: return tensor.to(at::kFloat).contiguous();
    case GgmlType::f16: return tensor.to(at::kFloat).to(at::kHalf).contiguous();
    case GgmlType::bf16: return tensor.to(at::kFloat).to(at::kBFloat16).contiguous();
    default: break;
  }
  const std::optional<kernels::GgmlQuantType> quant = quant_type(type);
  FERRY_CHECK(quant.has_value(), "Ferry writes F32, F16, BF16, Q4_0, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K, not ",
              ggml_type_name(type));
  const int64_t block = ggml_type_traits(type).block_elements;
  FERRY_CHECK(tensor.dim() >= 1 && tensor.size(-1) % block == 0, ggml_type_name(type), " rows must be a multiple of ",
              block, " values, got shape ", tensor.sizes());
  const at::Tensor values = tensor.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({static_cast<int64_t>(ggml_nbytes(type, values.numel()))}, at::kByte);
  kernels::ggml_quantize(*quant, values.data_ptr<float>(), values.numel(), out.data_ptr<uint8_t>());
  return out;
}

}  // namespace ferry::io
