// LoRA on one Linear projection: y = base(x) + lora_B(lora_A(dropout(x))) * (alpha / rank).
// lora_A (rank, in) and lora_B (out, rank) are registered as children of the base Linear, so their
// Hugging Face names are PEFT's without the adapter name: `...q_proj.lora_A.weight`, and the
// offload engine groups them with their decoder layer. A projection without an adapter is a plain
// Linear. A base whose weight is NF4 (QLoRA, nf4_linear.h) runs nf4_linear instead of its float
// matmul. Attaching, freezing and merging for a whole model is src/model/lora.h.
#pragma once

#include <torch/torch.h>

namespace ferry {

struct LoraAdapter {
  torch::nn::Linear lora_A{nullptr};  // in -> rank, no bias
  torch::nn::Linear lora_B{nullptr};  // rank -> out, no bias
  double scaling = 0.0;               // alpha / rank
  double dropout = 0.0;               // on the adapter's input, in training mode only
  bool enabled = true;                // false: the projection computes base(x) alone (DPO's reference)

  bool attached() const { return !lora_A.is_empty(); }
};

// base(x), plus the adapter's update when one is attached and enabled. x: (..., in) -> (..., out).
torch::Tensor lora_project(const torch::nn::Linear& base, const LoraAdapter& adapter, const torch::Tensor& x,
                           bool training);

}  // namespace ferry
