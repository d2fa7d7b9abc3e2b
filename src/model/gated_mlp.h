// The gated MLP of a decoder layer, and of each expert of a Mixture-of-Experts layer:
// down_proj(act(gate_proj(x)) * up_proj(x)), act SiLU (SwiGLU) or tanh GELU (GeGLU). Its projections
// are separate, or (Phi-3) one fused gate_up_proj. Each may carry a LoRA adapter (lora_linear.h).
#pragma once

#include <torch/torch.h>

#include <string>

#include "core/config/model_shape.h"
#include "src/model/lora_linear.h"

namespace ferry {

// The module names of the three projections: Hugging Face's gate_proj / up_proj / down_proj, or
// Mixtral's experts' w1 / w3 / w2.
struct MlpNames {
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
};

class GatedMlpImpl : public torch::nn::Module {
 public:
  // `intermediate`: the MLP's width (intermediate_size; an expert's moe_intermediate_size).
  GatedMlpImpl(const ModelShape& config, int64_t intermediate, MlpNames names = {});
  torch::Tensor forward(const torch::Tensor& x);  // (..., C) -> (..., C)

  const MlpNames& names() const { return names_; }

  // Separate gate/up projections, or (config.fused_projections, Phi-3) one gate_up_proj: gate rows, then up rows.
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, gate_up_proj{nullptr}, down_proj{nullptr};
  LoraAdapter gate_lora, up_lora, gate_up_lora, down_lora;

 private:
  MlpActivation activation_;
  MlpNames names_;
};
TORCH_MODULE(GatedMlp);

}  // namespace ferry
