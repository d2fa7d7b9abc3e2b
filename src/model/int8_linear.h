// The int8 frozen base projection (lora.quantize_base int8): a Linear's weight held as
// bitsandbytes' LLM.int8 storage without outliers (kernels/ops/int8.h: int8 codes + one fp32 absmax
// per output row, ~1 byte per weight) instead of a float parameter. Int8Weight is registered as the
// child `int8` of the torch::nn::Linear whose weight it replaces, as Nf4Weight is (nf4_linear.h),
// and lora_project (lora_linear.h) calls int8_linear for it.
//
// int8_linear dequantises the weight per call into the input's dtype and runs the matmul; its
// backward dequantises again for grad_input = grad_out @ W. The dequantised weight is never saved
// for backward, and the weight gets no gradient.
#pragma once

#include <torch/torch.h>

#include "kernels/ops/int8.h"

namespace ferry {

class Int8WeightImpl : public torch::nn::Module {
 public:
  // Takes a quantised (out, in) weight; its tensors become this module's buffers `cb` and `scb`
  // (state_of names them as bitsandbytes saves a Linear8bitLt: the weight and `<module>.SCB`).
  explicit Int8WeightImpl(kernels::Int8Tensor quantized);

  const kernels::Int8Tensor& quantized() const { return q_; }
  int64_t out_features() const { return q_.cb.size(0); }
  int64_t in_features() const { return q_.cb.size(1); }
  torch::Tensor dequantize(at::ScalarType dtype) const { return kernels::int8_dequantize_tensor(q_, dtype); }
  // Replaces the quantised tensors (same shape), e.g. from a checkpoint; moved to this device.
  void assign(const kernels::Int8Tensor& quantized);

  // Moving changes the device only: the codes and scales never change dtype.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 private:
  kernels::Int8Tensor q_;
};
TORCH_MODULE(Int8Weight);

// x: (..., in) -> (..., out) = x @ W^T with W dequantised in x's dtype. Gradients flow to x only.
torch::Tensor int8_linear(const torch::Tensor& x, const Int8WeightImpl& weight);

// The int8 weight of a projection, or nullptr when it holds another kind.
Int8WeightImpl* int8_weight_of(const torch::nn::LinearImpl& linear);

// Replaces `linear`'s float weight parameter by `quantized` (moved to the Linear's device; pass
// owned tensors). InputError when its shape is not the Linear's (out, in).
void set_linear_int8(torch::nn::LinearImpl& linear, const kernels::Int8Tensor& quantized);

// The dequantised weight, in the dtype it was quantised from, becomes the Linear's (frozen) weight
// parameter again.
void dequantize_linear_int8(torch::nn::LinearImpl& linear);

}  // namespace ferry
