// offload.policy: auto at run time: the planner (offload/planner.h) picks, for the run's model
// shape, precision, sequence length and device budget, the policy (none / optimizer / params),
// which groups stay on the device and which decoder layers recompute their activations; this
// turns its plan into the EngineOptions the engine is built with, and the micro-batch: when the
// configured one does not fit, a smaller power of two with more accumulation steps (the same
// global batch) — the run's data loader and loop use those.
//
// Budget: offload.gpu_memory, else the GPU's memory; without a GPU and without a budget there is
// nothing to fit and the plan is `none`. The CPU-emulated device has no CUDA context, so its
// fixed overhead is 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/config/config.h"
#include "core/config/model_shape.h"
#include "offload/engine.h"
#include "offload/planner.h"

namespace ferry::offload {

struct AutoPolicy {
  EngineOptions options;  // policy never auto
  int64_t micro_batch_size = 1;   // what the plan computes at once...
  int64_t grad_accumulation = 1;  // ...and how many of those make the configured global batch
  std::string summary;    // one line: the plan and why
};

// The planner's request for a run of `config` on `model` within `device_budget`: shape, precision,
// sequence length, LoRA, chunking, configured rates, micro-batch; under a fixed offload.policy the
// plan is that policy's with the configured checkpointing (nothing searched), under auto every
// choice is searched. Shared by `ferry plan` and the runtime auto policy.
PlannerRequest planner_request(const Config& config, const ModelShape& model, uint64_t device_budget);

// Whether the config keeps state only the CPU optimizer has (int8 moments, a bf16 master, the NVMe
// tiers): then only the offloading policies can run it.
bool keeps_cpu_optimizer_state(const OffloadConfig& offload);

// `device_bytes`: the GPU's memory (0 when the run is on the CPU). Throws ConfigError, with the
// planner's explanation, when no plan fits the budget.
// `rates`: measured ones (offload/rate_probe.h); unset: offload.pcie_bandwidth_gbps and the
// defaults.
AutoPolicy resolve_auto_policy(const Config& config, const ModelShape& model, uint64_t device_bytes,
                               const std::optional<PlannerRates>& rates = std::nullopt);

}  // namespace ferry::offload
