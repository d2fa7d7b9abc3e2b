// QLoRA's frozen base projection: a Linear's weight held in NF4 (kernels/ops/nf4.h, bitsandbytes'
// format) instead of a float parameter. Nf4Weight is registered as the child `nf4` of the
// torch::nn::Linear it replaces the weight of (which keeps its name, its optional bias and its LoRA
// adapter children), and lora_project (lora_linear.h) calls nf4_linear for it.
//
// nf4_linear dequantises the weight per call into the input's dtype and runs the matmul; its
// backward dequantises again for grad_input = grad_out @ W. As bitsandbytes' matmul_4bit, the
// weight is dequantised into its quant state's dtype first and then cast when the input's differs
// (a bf16 checkpoint used in fp32), so both round the same. The dequantised weight is never saved
// for backward (the graph holds only the packed tensors), and the weight gets no gradient.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "kernels/ops/nf4.h"

namespace ferry {

class Nf4WeightImpl : public torch::nn::Module {
 public:
  // Takes a quantised (out, in) weight; its tensors become this module's buffers `packed`, `absmax`
  // and `nested_absmax` (named_buffers shows them; state_of names them as bitsandbytes does).
  explicit Nf4WeightImpl(kernels::Nf4Tensor quantized);

  const kernels::Nf4Tensor& quantized() const { return q_; }
  int64_t out_features() const { return q_.shape.at(0); }
  int64_t in_features() const { return q_.shape.at(1); }
  // The weight (out, in) in `dtype` on the buffers' device; a fresh tensor on every call.
  torch::Tensor dequantize(at::ScalarType dtype) const;
  // Replaces the quantised tensors (same shape), e.g. from a checkpoint; moved to this device.
  void assign(const kernels::Nf4Tensor& quantized);

  // Moving changes the device only: the packed codes and fp32 scales never change dtype, so
  // `model->to(torch::kBFloat16)` leaves them as they are (the compute dtype is the input's).
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 private:
  void register_tensors();
  kernels::Nf4Tensor q_;
};
TORCH_MODULE(Nf4Weight);

// x: (..., in) -> (..., out) = x @ W^T with W dequantised from `weight` in x's dtype. Gradients
// flow to x only.
torch::Tensor nf4_linear(const torch::Tensor& x, const Nf4WeightImpl& weight);

// The NF4 weight of a projection, or nullptr when it holds a float weight.
Nf4WeightImpl* nf4_weight_of(const torch::nn::LinearImpl& linear);

// Replaces `linear`'s float weight parameter by an NF4 weight quantised from `source` (out, in)
// (any float dtype; the quant state records it), with bnb's double quantisation when
// `double_quant`. The Linear's float weight is released; its bias (if any) stays a parameter.
void quantize_linear_nf4(torch::nn::LinearImpl& linear, const torch::Tensor& source, bool double_quant);

// Replaces `linear`'s float weight parameter by the NF4 weight `quantized` as it is (a 4-bit
// checkpoint's tensors; they are moved to the Linear's device, so pass owned tensors, not views of
// a mapped file). InputError when its shape is not the Linear's (out, in).
void set_linear_nf4(torch::nn::LinearImpl& linear, const kernels::Nf4Tensor& quantized);

// Undoes quantize_linear_nf4: the dequantised weight, in the quant state's dtype, becomes the
// Linear's (frozen) weight parameter again (merging adapters into an NF4 model does this first).
void dequantize_linear_nf4(torch::nn::LinearImpl& linear);

// For tests: called with every weight nf4_linear dequantises (forward and backward), so a test can
// check that nothing keeps it alive. Empty by default; not thread-safe to change during a run.
void set_nf4_dequantize_observer(std::function<void(const torch::Tensor&)> observer);

}  // namespace ferry
