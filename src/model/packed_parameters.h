// One buffer for a model's weights (see pack_parameters).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch::nn {
class Module;
}

namespace ferry {

// Moves every CPU tensor of `parameters` (distinct parameters of one or more models), with its
// values, into one buffer per dtype, each starting on a 4 KiB page; the parameters become views of
// it (gradients and optimizer state are unaffected; a later move to another device gives each its
// own memory again). Their old storage is freed one by one as they move, so the process never holds
// two copies. A model's weights are then one large allocation, on huge pages where the process
// asks for them (cli/huge_pages.h), laid out alike in every process. Left to the allocator, a few
// hundred weights land in the heap or in mappings of their own depending on what the process
// allocated before: a train-grpo rollout decoded 3-5% slower than `ferry generate` on the same
// model for that alone (scripts/bench-rollout.sh).
// For models whose weights stay where they are: an engine that copies them into chunks of its own
// (offload/chunked_engine.h) would hold the whole buffer until its last parameter left it.
void pack_parameters(const std::vector<at::Tensor>& parameters);
void pack_parameters(torch::nn::Module& module);

}  // namespace ferry
