// A Mixture-of-Experts MLP (transformers' <Family>SparseMoeBlock): a router (`gate`, a linear map
// to one logit per expert) scores every token; softmax over the experts, the top-k probabilities
// (renormalised where the family says: norm_topk_prob) weight the outputs of the k experts chosen,
// each a gated MLP of its own (`experts.N`). Qwen2-MoE adds a shared expert every token runs,
// times sigmoid(shared_expert_gate(x)).
//
// Tokens are grouped by expert: each expert a token chose runs once, one GEMM per projection over
// all its tokens, and the results are added back in expert order (as transformers does, so fp32
// sums match). Each expert is an ordinary projection (a Linear that LoRA, NF4 or a GGUF's blocks can
// replace) and its parameters sit in the decoder layer's chunk like any other.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "core/config/model_shape.h"
#include "src/model/gated_mlp.h"
#include "src/model/lora_linear.h"

namespace ferry {

class RouterLoad;

class SparseMoeBlockImpl : public torch::nn::Module {
 public:
  SparseMoeBlockImpl(const ModelShape& config, int64_t layer_index);

  // x: (..., C) -> (..., C).
  torch::Tensor forward(const torch::Tensor& x);

  // The router's logits (N, E) for x (..., C): what forward routes by.
  torch::Tensor router_logits(const torch::Tensor& x);

  // Where this block records its routing during a forward (router_load.h); null: nowhere.
  void set_router_load(std::shared_ptr<RouterLoad> load) { load_ = std::move(load); }

  torch::nn::Linear gate{nullptr};  // the router: C -> E, no bias
  LoraAdapter gate_lora;
  torch::nn::ModuleList experts{nullptr};
  std::vector<GatedMlp> expert_mlps;  // the same modules as `experts`, typed
  GatedMlp shared_expert{nullptr};
  torch::nn::Linear shared_expert_gate{nullptr};  // C -> 1

 private:
  int64_t layer_index_, num_experts_, top_k_;
  bool normalize_;
  std::shared_ptr<RouterLoad> load_;
};
TORCH_MODULE(SparseMoeBlock);

}  // namespace ferry
