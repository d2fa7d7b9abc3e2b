// The parameter engine a training run uses, from its config: resolves offload.policy auto into a
// plan (offload/auto_policy.h), caps the GPU's caching allocator at offload.gpu_memory (so
// activations and workspaces are held to the budget too, not only what the engine counts), and
// makes the engine. Every stage builds its engine here; in a data-parallel run the engine gets the
// process group and distributed.zero_stage (EngineOptions::shard_group).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <ostream>

#include "core/config/config.h"
#include "core/config/model_shape.h"
#include "offload/engine.h"

namespace ferry {

// Total memory of a CUDA device in bytes; 0 for the CPU (or a build without CUDA).
uint64_t device_memory_total(c10::Device device);

// The most bytes the CUDA caching allocator has held on `device` since the process started
// (activations and workspaces included); 0 for the CPU.
uint64_t device_memory_peak(c10::Device device);

// The engine computes on `device` and takes models built on the host (EngineOptions::device).
// `model`: the shape of the (largest) model the engine will hold. Writes one line about the plan
// to `log` under auto, and one about the memory cap when one is set on a GPU. Under auto the plan
// may lower config.train.micro_batch_size, raising config.train.grad_accumulation to keep the
// global batch: build the run's data loader and loop from `config` after this call.
// `models`: how many models of that shape share the budget (PPO: up to four). The auto planner then
// plans one model within budget / models, so that every model keeping the planned groups fits
// together; when no such plan exists the engine pages every group (params), which needs about one
// model's working set. The engine's budget stays the whole one.
std::unique_ptr<offload::ParameterEngine> make_run_engine(Config& config, const ModelShape& model, c10::Device device,
                                                 std::ostream& log, int64_t models = 1);

}  // namespace ferry
