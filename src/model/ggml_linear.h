// LoRA's frozen base projection on a GGUF model (lora.quantize_base gguf): a Linear's weight held as
// the file stores it, packed ggml blocks of any type Ferry reads (src/io/ggml_tensor.h: Q4_0 ...
// Q6_K), instead of a float parameter. GgmlWeight is registered as the child `ggml` of the
// torch::nn::Linear whose weight it replaces, as Nf4Weight is (nf4_linear.h), and lora_project
// (lora_linear.h) calls ggml_linear for it.
//
// ggml_linear dequantises the weight per call into the input's dtype (ggml_dequantize: the same
// values as loading the GGUF with lora.quantize_base none) and runs the matmul; its backward
// dequantises again for grad_input = grad_out @ W. The dequantised weight is never saved for
// backward (the graph holds only the packed blocks), and the weight gets no gradient.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "src/io/ggml_tensor.h"

namespace ferry {

class GgmlWeightImpl : public torch::nn::Module {
 public:
  // Takes a packed (out, in) weight; its blocks become this module's buffer `blocks` (state_of
  // names it as src/io/ggml_checkpoint.h says). `dtype` is the run's compute dtype: adapters take
  // it, and dequantize_linear_ggml gives the weight back in it.
  GgmlWeightImpl(io::GgmlTensor quantized, at::ScalarType dtype);

  const io::GgmlTensor& quantized() const { return q_; }
  at::ScalarType dtype() const { return dtype_; }
  int64_t out_features() const { return q_.shape.at(0); }
  int64_t in_features() const { return q_.shape.at(1); }
  // The weight (out, in) in `dtype` on the blocks' device; a fresh tensor on every call.
  torch::Tensor dequantize(at::ScalarType dtype) const { return io::ggml_dequantize(q_, dtype); }
  // Replaces the blocks (same type and shape), e.g. from a checkpoint, in place.
  void assign(const io::GgmlTensor& quantized);

  // Moving changes the device only: the packed blocks never change dtype.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 private:
  io::GgmlTensor q_;
  at::ScalarType dtype_;
};
TORCH_MODULE(GgmlWeight);

// x: (..., in) -> (..., out) = x @ W^T with W dequantised in x's dtype. Gradients flow to x only.
torch::Tensor ggml_linear(const torch::Tensor& x, const GgmlWeightImpl& weight);

// The ggml weight of a projection, or nullptr when it holds another kind.
GgmlWeightImpl* ggml_weight_of(const torch::nn::LinearImpl& linear);

// Replaces `linear`'s float weight parameter by `quantized` (moved to the Linear's device; pass
// owned blocks, not views of a mapped file). InputError when its shape is not the Linear's.
void set_linear_ggml(torch::nn::LinearImpl& linear, const io::GgmlTensor& quantized, at::ScalarType dtype);

// The dequantised weight, in the run's dtype, becomes the Linear's (frozen) weight parameter again
// (merging adapters does this first).
void dequantize_linear_ggml(torch::nn::LinearImpl& linear);

// For tests: called with every weight ggml_linear dequantises (forward and backward), so a test can
// check that nothing keeps it alive. Empty by default; not thread-safe to change during a run.
void set_ggml_dequantize_observer(std::function<void(const torch::Tensor&)> observer);

}  // namespace ferry
