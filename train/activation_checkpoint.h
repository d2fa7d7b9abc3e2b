// Activation checkpointing for one group of the model (train.gradient_checkpointing for decoder
// layers; every group whose parameters the offload engine pages): the forward runs without
// keeping the group's activations, only its input; backward re-runs the group's forward from that
// input (with the RNG state of the first run, so dropout draws the same masks) and
// back-propagates through the recomputation. Memory per layer drops from all intermediate
// activations to one (B, T, C) tensor, for about one extra forward per step; and no autograd
// graph references the group's parameters between its forward and its backward, so the engine
// may page them out in between.
//
// libtorch's C++ frontend has no torch.utils.checkpoint; this is its reentrant variant as a
// custom torch::autograd::Function.
#pragma once

#include <torch/torch.h>

#include <functional>

namespace ferry {
namespace offload {
class ActivationOffloader;
}

// y = fn(input), checkpointed. `fn` must read only `input`, tensors it captured that need no
// gradient (token ids, masks) and module parameters. `before_recompute` and `after_backward` (may
// be empty) run in backward around the recomputation: the offload engine's hooks for paging the
// group's parameters in and out. An `input` that needs no gradient (the embedding's, or hidden
// states under frozen embeddings) is fine: the parameters still get theirs.
// With an `offloader` (train.activation_offload), the saved input waits in host memory between
// the forward and the backward instead of on the device (offload/activation_offload.h); the
// offloader must outlive the graph.
torch::Tensor checkpointed(std::function<torch::Tensor(const torch::Tensor&)> fn, const torch::Tensor& input,
                           std::function<void()> before_recompute = {}, std::function<void()> after_backward = {},
                           offload::ActivationOffloader* offloader = nullptr);

}  // namespace ferry
