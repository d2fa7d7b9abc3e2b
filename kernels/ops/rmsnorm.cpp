// RMSNorm dispatch between the CUDA kernel and the reference formula.
#include "kernels/ops/rmsnorm.h"

#include <ATen/ATen.h>

#include "core/error.h"

#ifdef FERRY_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/rmsnorm.h"
#endif

namespace ferry::kernels {

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& w, double eps) {
  const auto input_type = x.scalar_type();
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * normed.to(input_type);
}

bool rms_norm_uses_cuda_kernel(const at::Tensor& x) {
#ifdef FERRY_WITH_CUDA
  return x.is_cuda();
#else
  return false;
#endif
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  if (!rms_norm_uses_cuda_kernel(x) || x.scalar_type() != w.scalar_type()) return rms_norm_reference(x, w, eps);
#ifdef FERRY_WITH_CUDA
  FERRY_CHECK(w.dim() == 1 && x.size(-1) == w.size(0), "rms_norm: weight must be (C) with C = x.size(-1)");
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = w.contiguous();
  at::Tensor y = at::empty_like(xc);
  cuda::ElementType type;
  switch (x.scalar_type()) {
    case at::kFloat: type = cuda::ElementType::f32; break;
    case at::kBFloat16: type = cuda::ElementType::bf16; break;
    case at::kHalf: type = cuda::ElementType::f16; break;
    default: return rms_norm_reference(x, w, eps);
  }
  const int64_t cols = x.size(-1);
  cuda::rmsnorm_forward(type, xc.data_ptr(), wc.data_ptr(), y.data_ptr(), xc.numel() / cols, cols,
                        static_cast<float>(eps), c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  return y;
#else
  return rms_norm_reference(x, w, eps);
#endif
}

}  // namespace ferry::kernels
