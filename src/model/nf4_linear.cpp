// The NF4 base projection and its autograd function (see nf4_linear.h).
#include "src/model/nf4_linear.h"

#include "core/error.h"
#include "src/model/linear_weight_slot.h"

namespace ferry {
namespace {

std::function<void(const torch::Tensor&)>& observer() {
  static std::function<void(const torch::Tensor&)> f;
  return f;
}

// The weight in `dtype`, rounded as bitsandbytes does: to the quant state's dtype, then cast.
torch::Tensor dequantize_observed(const kernels::Nf4Tensor& q, at::ScalarType dtype) {
  torch::Tensor w = kernels::nf4_dequantize_tensor(q, q.dtype);  // (out, in)
  if (w.scalar_type() != dtype) w = w.to(dtype);
  if (observer()) observer()(w);
  return w;
}

// Forward saves the packed tensors (the module's own buffers, no copy) and the scalars that
// describe them; backward dequantises again. Nothing of the size of the full weight is saved.
class Nf4LinearFunction : public torch::autograd::Function<Nf4LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const Nf4WeightImpl* weight) {
    const kernels::Nf4Tensor& q = weight->quantized();
    ctx->saved_data["packed"] = q.packed;
    ctx->saved_data["absmax"] = q.absmax;
    ctx->saved_data["nested"] = q.nested();
    if (q.nested()) ctx->saved_data["nested_absmax"] = q.nested_absmax;
    ctx->saved_data["offset"] = static_cast<double>(q.nested_offset);
    ctx->saved_data["shape"] = q.shape;
    ctx->saved_data["blocksize"] = q.blocksize;
    ctx->saved_data["dtype"] = static_cast<int64_t>(q.dtype);
    return torch::linear(x, dequantize_observed(q, x.scalar_type()));  // (..., out)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    kernels::Nf4Tensor q;
    q.packed = ctx->saved_data["packed"].toTensor();
    q.absmax = ctx->saved_data["absmax"].toTensor();
    if (ctx->saved_data["nested"].toBool()) q.nested_absmax = ctx->saved_data["nested_absmax"].toTensor();
    q.nested_offset = static_cast<float>(ctx->saved_data["offset"].toDouble());
    q.shape = ctx->saved_data["shape"].toIntVector();
    q.blocksize = ctx->saved_data["blocksize"].toInt();
    q.dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const torch::Tensor& grad = grads[0];  // (..., out)
    const torch::Tensor grad_x = torch::matmul(grad, dequantize_observed(q, grad.scalar_type()));  // (..., in)
    return {grad_x, torch::Tensor()};
  }
};

}  // namespace

Nf4WeightImpl::Nf4WeightImpl(kernels::Nf4Tensor quantized) : q_(std::move(quantized)) {
  FERRY_CHECK(q_.shape.size() == 2, "Nf4Weight: expected a 2-D (out, in) weight, got ", q_.shape.size(), " dims");
  register_tensors();
}

void Nf4WeightImpl::register_tensors() {
  register_buffer("packed", q_.packed);
  register_buffer("absmax", q_.absmax);
  if (q_.nested()) register_buffer("nested_absmax", q_.nested_absmax);
}

torch::Tensor Nf4WeightImpl::dequantize(at::ScalarType dtype) const { return kernels::nf4_dequantize_tensor(q_, dtype); }

void Nf4WeightImpl::assign(const kernels::Nf4Tensor& quantized) {
  if (quantized.shape != q_.shape || quantized.nested() != q_.nested() ||
      quantized.packed.numel() != q_.packed.numel() || quantized.absmax.numel() != q_.absmax.numel()) {
    throw InputError(detail::concat("NF4 weight does not fit: shape ", c10::IntArrayRef(quantized.shape),
                                    quantized.nested() ? " (double-quantised)" : "", ", model ",
                                    c10::IntArrayRef(q_.shape), q_.nested() ? " (double-quantised)" : "",
                                    "; set lora.double_quant as in the run that wrote it"));
  }
  // Written in place: a parameter engine may hold these tensors as views of its chunks
  // (group_parameters lists them), and with_weights(write) expects the new values there.
  torch::NoGradGuard no_grad;
  q_.packed.copy_(quantized.packed.reshape(q_.packed.sizes()));
  q_.absmax.copy_(quantized.absmax.reshape(q_.absmax.sizes()));
  if (q_.nested()) q_.nested_absmax.copy_(quantized.nested_absmax.reshape(q_.nested_absmax.sizes()));
  q_.nested_offset = quantized.nested_offset;
  q_.blocksize = quantized.blocksize;
  q_.dtype = quantized.dtype;
}

void Nf4WeightImpl::to(torch::Device device, torch::Dtype /*dtype*/, bool non_blocking) { to(device, non_blocking); }

void Nf4WeightImpl::to(torch::Dtype /*dtype*/, bool /*non_blocking*/) {}

void Nf4WeightImpl::to(torch::Device device, bool non_blocking) {
  for (torch::Tensor* t : {&q_.packed, &q_.absmax, &q_.nested_absmax}) {
    if (t->defined() && t->device() != device) t->set_data(t->to(device, non_blocking));
  }
}

torch::Tensor nf4_linear(const torch::Tensor& x, const Nf4WeightImpl& weight) {
  if (x.size(-1) != weight.in_features()) {
    throw InternalError(detail::concat("nf4_linear: input ", x.sizes(), " does not fit the weight (",
                                       weight.out_features(), ", ", weight.in_features(), ")"));
  }
  return Nf4LinearFunction::apply(x, &weight);
}

Nf4WeightImpl* nf4_weight_of(const torch::nn::LinearImpl& linear) {
  if (linear.weight.defined()) return nullptr;
  for (const auto& child : linear.named_children()) {
    if (child.key() == "nf4") return dynamic_cast<Nf4WeightImpl*>(child.value().get());
  }
  return nullptr;
}

void quantize_linear_nf4(torch::nn::LinearImpl& linear, const torch::Tensor& source, bool double_quant) {
  FERRY_CHECK(linear.weight.defined(), "quantize_linear_nf4: the projection is already quantised");
  if (source.sizes() != linear.weight.sizes()) {
    throw InputError(detail::concat("weight of shape ", source.sizes(), " does not fit the projection ",
                                    linear.weight.sizes()));
  }
  set_linear_nf4(linear, kernels::nf4_quantize_tensor(source.detach(), double_quant));
}

void set_linear_nf4(torch::nn::LinearImpl& linear, const kernels::Nf4Tensor& quantized) {
  FERRY_CHECK(linear.weight.defined(), "set_linear_nf4: the projection is already quantised");
  if (c10::IntArrayRef(quantized.shape) != linear.weight.sizes()) {
    throw InputError(detail::concat("4-bit weight of shape ", c10::IntArrayRef(quantized.shape),
                                    " does not fit the projection ", linear.weight.sizes()));
  }
  const c10::Device device = linear.weight.device();
  drop_linear_weight(linear);
  linear.register_module("nf4", Nf4Weight(kernels::nf4_to_device(quantized, device)));
}

void dequantize_linear_nf4(torch::nn::LinearImpl& linear) {
  Nf4WeightImpl* q = nf4_weight_of(linear);
  FERRY_CHECK(q != nullptr, "dequantize_linear_nf4: the projection is not quantised");
  torch::Tensor w = q->dequantize(q->quantized().dtype);
  linear.unregister_module("nf4");
  linear.weight = linear.register_parameter("weight", w, /*requires_grad=*/false);
}

void set_nf4_dequantize_observer(std::function<void(const torch::Tensor&)> f) { observer() = std::move(f); }

}  // namespace ferry
