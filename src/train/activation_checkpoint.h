// Activation checkpointing for one decoder layer (train.gradient_checkpointing): the forward runs
// without keeping the layer's activations, only its input; backward re-runs the layer's forward
// from that input (with the RNG state of the first run, so dropout would draw the same masks) and
// back-propagates through the recomputation. Memory per layer drops from all intermediate
// activations to one (B, T, C) tensor, for about one extra forward per step.
//
// libtorch's C++ frontend has no torch.utils.checkpoint; this is its reentrant variant as a
// custom torch::autograd::Function.
#pragma once

#include <torch/torch.h>

#include <functional>

#include "src/model/llama_block.h"
#include "src/model/llama_model.h"

namespace ferry {

// hidden: (B, T, C) -> (B, T, C), as layer(hidden, inputs...). `before_recompute` and
// `after_backward` (may be empty) run in backward around the recomputation: the offload engine's
// hooks for paging the layer's parameters in and its gradients out.
torch::Tensor checkpointed_layer(LlamaDecoderLayerImpl& layer, const torch::Tensor& hidden, const LayerInputs& inputs,
                                 std::function<void()> before_recompute = {},
                                 std::function<void()> after_backward = {});

}  // namespace ferry
