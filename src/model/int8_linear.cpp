// The int8 base projection and its autograd function (see int8_linear.h).
#include "src/model/int8_linear.h"

#include "core/error.h"
#include "src/model/linear_weight_slot.h"

namespace ferry {
namespace {

// Forward saves the int8 tensors (the module's own buffers, no copy); backward dequantises again.
class Int8LinearFunction : public torch::autograd::Function<Int8LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const Int8WeightImpl* weight) {
    const kernels::Int8Tensor& q = weight->quantized();
    ctx->saved_data["cb"] = q.cb;
    ctx->saved_data["scb"] = q.scb;
    return torch::linear(x, kernels::int8_dequantize_tensor(q, x.scalar_type()));  // (..., out)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    kernels::Int8Tensor q;
    q.cb = ctx->saved_data["cb"].toTensor();
    q.scb = ctx->saved_data["scb"].toTensor();
    const torch::Tensor& grad = grads[0];  // (..., out)
    return {torch::matmul(grad, kernels::int8_dequantize_tensor(q, grad.scalar_type())), torch::Tensor()};
  }
};

}  // namespace

Int8WeightImpl::Int8WeightImpl(kernels::Int8Tensor quantized) : q_(std::move(quantized)) {
  FERRY_CHECK(q_.cb.dim() == 2 && q_.scb.dim() == 1 && q_.scb.size(0) == q_.cb.size(0),
              "Int8Weight: expected int8 (out, in) codes and fp32 (out) scales");
  register_buffer("cb", q_.cb);
  register_buffer("scb", q_.scb);
}

void Int8WeightImpl::assign(const kernels::Int8Tensor& quantized) {
  if (quantized.cb.sizes() != q_.cb.sizes() || quantized.scb.sizes() != q_.scb.sizes()) {
    throw InputError(detail::concat("int8 weight does not fit: shape ", quantized.cb.sizes(), ", model ",
                                    q_.cb.sizes()));
  }
  // Written in place: a parameter engine may hold these tensors as views of its chunks
  // (group_parameters lists them), and with_weights(write) expects the new values there.
  torch::NoGradGuard no_grad;
  q_.cb.copy_(quantized.cb);
  q_.scb.copy_(quantized.scb);
  q_.dtype = quantized.dtype;
}

void Int8WeightImpl::to(torch::Device device, torch::Dtype /*dtype*/, bool non_blocking) { to(device, non_blocking); }

void Int8WeightImpl::to(torch::Dtype /*dtype*/, bool /*non_blocking*/) {}

void Int8WeightImpl::to(torch::Device device, bool non_blocking) {
  for (torch::Tensor* t : {&q_.cb, &q_.scb}) {
    if (t->device() != device) t->set_data(t->to(device, non_blocking));
  }
}

torch::Tensor int8_linear(const torch::Tensor& x, const Int8WeightImpl& weight) {
  if (x.size(-1) != weight.in_features()) {
    throw InternalError(detail::concat("int8_linear: input ", x.sizes(), " does not fit the weight (",
                                       weight.out_features(), ", ", weight.in_features(), ")"));
  }
  return Int8LinearFunction::apply(x, &weight);
}

Int8WeightImpl* int8_weight_of(const torch::nn::LinearImpl& linear) {
  if (linear.weight.defined()) return nullptr;
  for (const auto& child : linear.named_children()) {
    if (child.key() == "int8") return dynamic_cast<Int8WeightImpl*>(child.value().get());
  }
  return nullptr;
}

void set_linear_int8(torch::nn::LinearImpl& linear, const kernels::Int8Tensor& quantized) {
  FERRY_CHECK(linear.weight.defined(), "set_linear_int8: the projection is already quantised");
  if (quantized.cb.sizes() != linear.weight.sizes()) {
    throw InputError(detail::concat("int8 weight of shape ", quantized.cb.sizes(), " does not fit the projection ",
                                    linear.weight.sizes()));
  }
  const c10::Device device = linear.weight.device();
  drop_linear_weight(linear);
  linear.register_module("int8", Int8Weight(kernels::int8_to_device(quantized, device)));
}

void dequantize_linear_int8(torch::nn::LinearImpl& linear) {
  Int8WeightImpl* q = int8_weight_of(linear);
  FERRY_CHECK(q != nullptr, "dequantize_linear_int8: the projection is not quantised");
  torch::Tensor w = q->dequantize(q->quantized().dtype);
  linear.unregister_module("int8");
  linear.weight = linear.register_parameter("weight", w, /*requires_grad=*/false);
}

}  // namespace ferry
