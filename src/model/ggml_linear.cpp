// The ggml base projection and its autograd function (see ggml_linear.h).
#include "src/model/ggml_linear.h"

#include "core/error.h"
#include "src/io/ggml_types.h"
#include "src/model/linear_weight_slot.h"

namespace ferry {
namespace {

std::function<void(const torch::Tensor&)>& observer() {
  static std::function<void(const torch::Tensor&)> f;
  return f;
}

torch::Tensor dequantize_observed(const io::GgmlTensor& q, at::ScalarType dtype) {
  torch::Tensor w = io::ggml_dequantize(q, dtype);  // (out, in)
  if (observer()) observer()(w);
  return w;
}

// Forward saves the blocks (the module's own buffer, no copy: a paging engine swaps its data in
// place) and the type; backward dequantises again. Nothing of the size of the full weight is saved.
class GgmlLinearFunction : public torch::autograd::Function<GgmlLinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const GgmlWeightImpl* weight) {
    const io::GgmlTensor& q = weight->quantized();
    ctx->saved_data["blocks"] = q.blocks;
    ctx->saved_data["type"] = static_cast<int64_t>(q.type);
    ctx->saved_data["shape"] = q.shape;
    return torch::linear(x, dequantize_observed(q, x.scalar_type()));  // (..., out)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    io::GgmlTensor q;
    q.blocks = ctx->saved_data["blocks"].toTensor();
    q.type = static_cast<io::GgmlType>(ctx->saved_data["type"].toInt());
    q.shape = ctx->saved_data["shape"].toIntVector();
    const torch::Tensor& grad = grads[0];  // (..., out)
    const torch::Tensor grad_x = torch::matmul(grad, dequantize_observed(q, grad.scalar_type()));  // (..., in)
    return {grad_x, torch::Tensor()};
  }
};

}  // namespace

GgmlWeightImpl::GgmlWeightImpl(io::GgmlTensor quantized, at::ScalarType dtype) : q_(std::move(quantized)), dtype_(dtype) {
  FERRY_CHECK(q_.shape.size() == 2 && q_.blocks.defined() && q_.blocks.dim() == 2,
              "GgmlWeight: expected packed (out, in) blocks");
  register_buffer("blocks", q_.blocks);
}

void GgmlWeightImpl::assign(const io::GgmlTensor& quantized) {
  if (quantized.type != q_.type || quantized.shape != q_.shape) {
    throw InputError(detail::concat("ggml weight does not fit: ", io::ggml_type_name(quantized.type), " ",
                                    c10::IntArrayRef(quantized.shape), ", model ", io::ggml_type_name(q_.type), " ",
                                    c10::IntArrayRef(q_.shape), "; resume with the model.path the run started from"));
  }
  // Written in place: a parameter engine may hold the blocks as a view of its chunks.
  torch::NoGradGuard no_grad;
  q_.blocks.copy_(quantized.blocks.reshape(q_.blocks.sizes()));
}

void GgmlWeightImpl::to(torch::Device device, torch::Dtype /*dtype*/, bool non_blocking) { to(device, non_blocking); }

void GgmlWeightImpl::to(torch::Dtype /*dtype*/, bool /*non_blocking*/) {}

void GgmlWeightImpl::to(torch::Device device, bool non_blocking) {
  if (q_.blocks.device() != device) q_.blocks.set_data(q_.blocks.to(device, non_blocking));
}

torch::Tensor ggml_linear(const torch::Tensor& x, const GgmlWeightImpl& weight) {
  if (x.size(-1) != weight.in_features()) {
    throw InternalError(detail::concat("ggml_linear: input ", x.sizes(), " does not fit the weight (",
                                       weight.out_features(), ", ", weight.in_features(), ")"));
  }
  return GgmlLinearFunction::apply(x, &weight);
}

GgmlWeightImpl* ggml_weight_of(const torch::nn::LinearImpl& linear) {
  if (linear.weight.defined()) return nullptr;
  for (const auto& child : linear.named_children()) {
    if (child.key() == "ggml") return dynamic_cast<GgmlWeightImpl*>(child.value().get());
  }
  return nullptr;
}

void set_linear_ggml(torch::nn::LinearImpl& linear, const io::GgmlTensor& quantized, at::ScalarType dtype) {
  FERRY_CHECK(linear.weight.defined(), "set_linear_ggml: the projection is already quantised");
  if (c10::IntArrayRef(quantized.shape) != linear.weight.sizes()) {
    throw InputError(detail::concat(io::ggml_type_name(quantized.type), " weight of shape ",
                                    c10::IntArrayRef(quantized.shape), " does not fit the projection ",
                                    linear.weight.sizes()));
  }
  const c10::Device device = linear.weight.device();
  drop_linear_weight(linear);
  linear.register_module("ggml", GgmlWeight(io::ggml_to_device(quantized, device), dtype));
}

void dequantize_linear_ggml(torch::nn::LinearImpl& linear) {
  GgmlWeightImpl* q = ggml_weight_of(linear);
  FERRY_CHECK(q != nullptr, "dequantize_linear_ggml: the projection is not quantised");
  torch::Tensor w = q->dequantize(q->dtype());
  linear.unregister_module("ggml");
  linear.weight = linear.register_parameter("weight", w, /*requires_grad=*/false);
}

void set_ggml_dequantize_observer(std::function<void(const torch::Tensor&)> f) { observer() = std::move(f); }

}  // namespace ferry
