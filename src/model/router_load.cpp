// The routers' load and the load-balancing loss (see router_load.h).
#include "src/model/router_load.h"

#include <ATen/core/ivalue.h>
#include <torch/autograd.h>

#include "core/error.h"

namespace ferry {
namespace {

// What an autograd context keeps of the RouterLoad: it must outlive the forward that made it.
struct RouterLoadCapsule : torch::CustomClassHolder {
  explicit RouterLoadCapsule(std::shared_ptr<RouterLoad> l) : load(std::move(l)) {}
  std::shared_ptr<RouterLoad> load;
};

c10::IValue capsule(std::shared_ptr<RouterLoad> load) {
  return c10::IValue::make_capsule(c10::make_intrusive<RouterLoadCapsule>(std::move(load)));
}

RouterLoad& load_of(const c10::IValue& value) {
  return *c10::static_intrusive_pointer_cast<RouterLoadCapsule>(value.toCapsule())->load;
}

// output -> output; in backward, probability_sums (E) gets the aux loss' gradient.
struct RouterGradient : torch::autograd::Function<RouterGradient> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& output,
                               const torch::Tensor& probability_sums, std::shared_ptr<RouterLoad> load) {
    ctx->saved_data["load"] = capsule(std::move(load));
    ctx->saved_data["options"] = probability_sums.options().dtype().toScalarType();
    ctx->saved_data["device"] = probability_sums.device();
    return output.view_as(output);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor gradient = load_of(ctx->saved_data["load"]).probability_gradient();
    const auto dtype = ctx->saved_data["options"].toScalarType();
    const auto device = ctx->saved_data["device"].toDevice();
    return {grads[0], gradient.to(device, dtype), torch::Tensor()};
  }
};

// anchor (a fresh leaf) -> coef * aux; in backward, tells the load the scale the loss was multiplied by.
struct RouterLossTerm : torch::autograd::Function<RouterLossTerm> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& anchor,
                               std::shared_ptr<RouterLoad> load) {
    const double value = load->coef() * load->aux_loss();
    ctx->saved_data["load"] = capsule(std::move(load));
    return torch::full({}, value, anchor.options());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    load_of(ctx->saved_data["load"]).set_loss_scale(grads[0].item<double>());
    return {torch::zeros_like(grads[0]), torch::Tensor()};
  }
};

}  // namespace

RouterLoad::RouterLoad(int64_t num_experts, int64_t top_k, double coef, torch::Tensor token_mask)
    : num_experts_(num_experts),
      top_k_(top_k),
      coef_(coef),
      token_mask_(token_mask.defined() ? token_mask.reshape({-1}).to(torch::kFloat) : token_mask),
      assignments_(torch::zeros({num_experts}, torch::kDouble)),
      probability_sums_(torch::zeros({num_experts}, torch::kDouble)) {
  if (token_mask_.defined()) mask_rows_ = token_mask_.sum().item<double>();
}

torch::Tensor RouterLoad::record(int64_t layer, const torch::Tensor& output, const torch::Tensor& logits,
                                 const torch::Tensor& probabilities, const torch::Tensor& chosen) {
  torch::Tensor mask = token_mask_;
  if (mask.defined()) {
    FERRY_CHECK(mask.size(0) == probabilities.size(0), "router load: token mask of ", mask.size(0), " rows for ",
                probabilities.size(0), " routed rows");
    mask = mask.to(probabilities.device());
  }
  const torch::Tensor weighted = mask.defined() ? probabilities * mask.unsqueeze(-1) : probabilities;
  const torch::Tensor sums = weighted.sum(0);  // (E), with the graph
  if (layers_.insert(layer).second) {  // not when a layer runs again in backward
    torch::NoGradGuard no_grad;
    const torch::Tensor flat = chosen.reshape({-1});
    const torch::Tensor weights = mask.defined() ? mask.repeat_interleave(top_k_) : torch::ones_like(flat, torch::kFloat);
    assignments_ += torch::zeros({num_experts_}, weights.options()).scatter_add_(0, flat, weights).to(torch::kCPU, torch::kDouble);
    probability_sums_ += sums.detach().to(torch::kCPU, torch::kDouble);
    rows_ += mask.defined() ? mask_rows_ : static_cast<double>(probabilities.size(0));
    if (keep_routing_) logits_[layer] = logits.detach().clone();
  }
  if (keep_routing_) chosen_[layer].push_back(chosen.detach().clone());
  if (coef_ == 0 || !torch::GradMode::is_enabled() || !probabilities.requires_grad()) return output;
  return RouterGradient::apply(output, sums, shared_from_this());
}

torch::Tensor RouterLoad::loss_term(const c10::Device& device) {
  const torch::Tensor anchor = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device).requires_grad(true));
  return RouterLossTerm::apply(anchor, shared_from_this());
}

double RouterLoad::aux_loss() const {
  if (rows_ <= 0) return 0;
  return static_cast<double>(num_experts_) * (assignments_ / rows_ * (probability_sums_ / rows_)).sum().item<double>();
}

torch::Tensor RouterLoad::expert_load() const {
  const double total = assignments_.sum().item<double>();
  return total > 0 ? (assignments_ / total).to(torch::kFloat) : torch::zeros({num_experts_});
}

torch::Tensor RouterLoad::probability_gradient() const {
  if (rows_ <= 0 || loss_scale_ == 0) return torch::zeros({num_experts_});
  return (assignments_ * (loss_scale_ * coef_ * static_cast<double>(num_experts_) / (rows_ * rows_))).to(torch::kFloat);
}

}  // namespace ferry
