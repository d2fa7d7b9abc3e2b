// The gated MLP (see gated_mlp.h).
#include "src/model/gated_mlp.h"

namespace ferry {
namespace {

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

GatedMlpImpl::GatedMlpImpl(const ModelShape& config, int64_t intermediate, MlpNames names)
    : activation_(config.mlp_activation), names_(std::move(names)) {
  const int64_t c = config.hidden_size, f = intermediate;
  if (config.fused_projections) {
    gate_up_proj = register_module("gate_up_proj", linear(c, 2 * f, config.mlp_bias));
  } else {
    gate_proj = register_module(names_.gate, linear(c, f, config.mlp_bias));
    up_proj = register_module(names_.up, linear(c, f, config.mlp_bias));
  }
  down_proj = register_module(names_.down, linear(f, c, config.mlp_bias));
}

torch::Tensor GatedMlpImpl::forward(const torch::Tensor& x) {
  const bool training = is_training();
  torch::Tensor gate, up;
  if (gate_up_proj) {  // Phi-3: gate rows first, as transformers' chunk(2) takes them
    const torch::Tensor both = lora_project(gate_up_proj, gate_up_lora, x, training);  // (..., 2F)
    const int64_t f = both.size(-1) / 2;
    gate = both.narrow(-1, 0, f);
    up = both.narrow(-1, f, f);
  } else {
    gate = lora_project(gate_proj, gate_lora, x, training);  // (..., F)
    up = lora_project(up_proj, up_lora, x, training);
  }
  const torch::Tensor activated = activation_ == MlpActivation::gelu_tanh ? torch::gelu(gate, "tanh") : torch::silu(gate);
  return lora_project(down_proj, down_lora, activated * up, training);
}

}  // namespace ferry
