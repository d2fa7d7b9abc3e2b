// The `auto` policy's planner: searches placement choices — policy (none / optimizer / params),
// per chunk keep on the device or page from the host, per layer activation checkpointing, and the
// micro-batch size (keeping the global batch through gradient accumulation) — and keeps the
// fastest plan, by the cost model (planner_cost.h), whose device bytes, by the memory model
// (memory_model.h), fit the budget. When none fits it says why: the smallest device footprint it
// found, what that consists of, and what would make a plan fit. Deterministic, milliseconds.
//
// The search is exhaustive over counts rather than subsets, because decoder layers are identical:
// "checkpoint c layers" for c = 0..L (always L under `params`, whose engine re-runs each group's
// forward in backward), with or without their inputs offloaded to the host, and "keep the k chunks that gain most from staying" for k = 0..chunks,
// ordered by how little compute each chunk has to hide its copy behind (the embedding, with none,
// first). More budget can only add feasible plans, so the chosen step time never gets worse as
// the budget grows. docs/offload.md describes the search and the cost model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "offload/memory_model.h"
#include "offload/planner_cost.h"

namespace ferry::offload {

struct PlannerRequest {
  TrainingShape shape;             // precision, seq_len, LoRA; grad_accumulation as configured
  MemoryModelConstants constants;  // overhead, chunk size, prefetch
  PlannerRates rates;
  uint64_t device_budget = 0;      // bytes; must be > 0
  uint64_t host_budget = 0;        // bytes for the host tier (offload.host_memory resolved); 0: no limit
  int64_t micro_batch_size = 1;    // as configured: the global batch is micro_batch_size × grad_accumulation
  // The search space. `auto`: every policy, micro-batches that divide the global batch, any number
  // of checkpointed layers, any number of kept chunks. A fixed policy: only that one, with the
  // configured micro-batch and checkpointing (all layers or none) and every chunk paged.
  std::vector<OffloadPolicy> policies{OffloadPolicy::none, OffloadPolicy::optimizer, OffloadPolicy::params};
  bool search_micro_batch = true;
  bool search_checkpointing = true;
  bool gradient_checkpointing = false;  // used when search_checkpointing is false
  // Activation offload (train.activation_offload) for the checkpointed layers: tried with and
  // without when searched, else as `activation_offload` says (true also forces it under a search).
  bool search_activation_offload = true;
  bool activation_offload = false;
  bool search_kept_chunks = true;
  // The runtime engine pages a chunk in again for backward by re-running its group's forward, so
  // under `params` every layer is checkpointed (offload/engine.h).
  bool params_checkpoints_every_layer = true;
};

struct Plan {
  PlacementChoice choice;
  int64_t grad_accumulation = 1;
  MemoryEstimate memory;
  StepTimeEstimate time;
  double tokens_per_step = 0;
  double tokens_per_s() const { return tokens_per_step / time.total_s(); }
  int64_t checkpointed_layers() const;
  // "activation checkpointing on 4 of 22 layers" (+ ", their inputs offloaded to host memory").
  std::string describe_checkpointing() const;
  int64_t kept_chunks() const;  // under params; every chunk otherwise
};

struct PlanResult {
  std::optional<Plan> best;  // empty when nothing fits the budget
  Plan smallest;             // the smallest device footprint searched (ties: the faster)
  // Among the plans that fit the device: the smallest host footprint. Set when the device budget
  // can be met; then, if nothing fits, the host budget is what fails.
  std::optional<Plan> smallest_host;
  ResolvedRates rates;
  int64_t candidates = 0;
  // When nothing fits: what would make a plan fit, one suggestion per line.
  std::vector<std::string> suggestions;
};

// Throws InternalError for an empty policy list or a zero budget (the CLI resolves budgets).
PlanResult plan(const PlannerRequest& request);

// The smallest device footprint over `request`'s search space (budget ignored).
Plan smallest_footprint(const PlannerRequest& request);

// The largest model of this shape's bytes per parameter on the host that fits `host_budget` under
// `plan` (its host bytes scale with the parameter count): a parameter count.
int64_t largest_model_for_host(const MemoryModel& model, const Plan& plan, uint64_t host_budget);

// Text, one line per optimizer-state format (fp32 moments; int8 moments; int8 moments with bf16 +
// Kahan master weights): `plan`'s host bytes under each, per parameter, whether they fit
// request.host_budget and the largest model that would (offload.optimizer_state,
// offload.master_weights).
std::string describe_state_formats(const PlannerRequest& request, const Plan& plan);

// Text: what the smallest footprint consists of and the suggestions; for the "no plan fits" error.
// When the device fits but the host does not: the host footprint, offload.host_memory and the
// largest model that would fit.
std::string explain_no_fit(const PlannerRequest& request, const PlanResult& result);

// Text: which chunks stay on the device ("embedding, layers 0-3") and which are paged, by block.
std::string describe_kept_chunks(const MemoryModel& model, const PlacementChoice& choice);

}  // namespace ferry::offload
