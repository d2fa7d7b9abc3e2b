// Row-wise int8 on tensors (see int8.h): ATen ops in bitsandbytes' order of operations.
#include "kernels/ops/int8.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "kernels/cpu/int8_rowwise.h"

namespace ferry::kernels {
namespace {

void check_dtype(at::ScalarType dtype, const char* what) {
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    throw InternalError(detail::concat(what, ": unsupported dtype ", c10::toString(dtype), " (fp32, bf16 or fp16)"));
  }
}

}  // namespace

Int8Tensor int8_quantize_tensor(const at::Tensor& w) {
  FERRY_CHECK(w.defined() && w.dim() == 2, "int8_quantize_tensor: expected a 2-D weight");
  check_dtype(w.scalar_type(), "int8_quantize_tensor");
  Int8Tensor q;
  q.dtype = w.scalar_type();
  const at::Tensor x = w.detach().to(at::kFloat);   // exact widening
  q.scb = std::get<0>(x.abs().max(1));              // (out) fp32
  const at::Tensor scale = (q.scb.reciprocal() * 127.0).unsqueeze(1);  // (out, 1), inf for a zero row
  q.cb = at::round(x * scale).masked_fill_((q.scb == 0).unsqueeze(1), 0).to(at::kChar);  // (out, in)
  return q;
}

at::Tensor int8_dequantize_tensor(const Int8Tensor& q, at::ScalarType dtype) {
  check_dtype(dtype, "int8_dequantize_tensor");
  const at::Tensor scale = (q.scb * kInt8InverseScale).unsqueeze(1);  // (out, 1) fp32
  return (q.cb.to(at::kFloat) * scale).to(dtype);                     // (out, in)
}

Int8Tensor int8_to_device(const Int8Tensor& q, c10::Device device) {
  Int8Tensor out = q;
  out.cb = q.cb.to(device);
  out.scb = q.scb.to(device);
  return out;
}

}  // namespace ferry::kernels
