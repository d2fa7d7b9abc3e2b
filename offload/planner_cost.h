// The planner's cost model: the estimated time of one optimizer step for a placement choice, from
// the model's FLOPs and the bytes each policy moves over PCIe, at given (measured or assumed)
// rates. Estimates, meant to rank plans against each other; docs/offload.md states the formulas:
//   compute   forward 2·p FLOPs per token per matmul parameter p (+ attention 2·T·heads·head_dim
//             per layer), backward twice that (once under LoRA for frozen weights), a recomputed
//             layer its forward again
//   per chunk max(compute, host->device bytes / bandwidth, device->host bytes / bandwidth): copies
//             run on a side stream and PCIe is full duplex, so a chunk costs its slowest part
//   offload  train.activation_offload copies each checkpointed layer's input to the host in forward
//             and back in backward, on the same side stream as the chunks' copies, plus a fixed
//             cost per copy pair (kActivationOffloadLayerOverheadS)
//   optimizer CPU AdamW at its params/s rate (overlapped with uploading the new weights), or
//             the fused GPU AdamW under `none`; with offload.overlap_step the CPU AdamW of every
//             chunk but the first hides behind the last micro-batch's backward; with the state on
//             the NVMe tier, the slower of that and reading + writing the state at the disk's
//             rates (the windows' IO overlaps the AdamW, offload/nvme_state_store.h)
//             with the weights on the NVMe tier, a paged chunk's copy runs at the slower of PCIe
//             and the drive's read rate, and the step reads and rewrites the trainable weights
//   bound     the resource with the most busy time in the step: device compute, PCIe (bytes both
//             ways over the per-direction rate), the CPU AdamW, the NVMe tier
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "offload/memory_model.h"

namespace ferry::offload {

// Rates as configured or measured; 0 means "use the default" (and the plan says so).
struct PlannerRates {
  double pcie_gbps = 0;              // offload.pcie_bandwidth_gbps: GB/s per direction
  double device_tflops = 0;          // sustained matmul TFLOP/s in the run's precision
  double cpu_adam_params_per_s = 0;  // CPU AdamW updates per second (all threads)
  double gpu_adam_params_per_s = 0;  // fused GPU AdamW updates per second
  // Where a non-zero rate came from, for the plan's assumptions ("measured here"); empty: the
  // flag or config key that sets it.
  std::string pcie_source, device_source, cpu_adam_source;
  // The NVMe tier's sequential read and write rates, GB/s (--measure with offload.nvme_dir).
  double nvme_read_gbps = 0, nvme_write_gbps = 0;
  std::string nvme_source;
};

// Defaults: a PCIe 3.0 x16 link with pinned memory (~12 GB/s), a laptop/desktop GPU's sustained
// bf16 tensor-core rate (fp32 a quarter of it: no TF32), a multi-threaded SIMD AdamW on a desktop
// (memory bound at ~28 bytes moved per parameter; ~0.6 G params/s measured on the 2-core CI
// machine, kernels/cpu/README.md) and a fused GPU AdamW. docs/offload.md lists them.
inline constexpr double kDefaultPcieGbps = 12.0;
inline constexpr double kDefaultHalfTflops = 40.0;
inline constexpr double kDefaultFp32Tflops = 10.0;
inline constexpr double kDefaultCpuAdamParamsPerS = 1.0e9;
inline constexpr double kDefaultGpuAdamParamsPerS = 2.0e10;
// A laptop's PCIe 3.0 x4 NVMe drive, sustained (past its write cache).
inline constexpr double kDefaultNvmeReadGbps = 2.5;
inline constexpr double kDefaultNvmeWriteGbps = 1.5;

// Rates in base units with a note for each one that was assumed rather than given.
struct ResolvedRates {
  double pcie_bytes_per_s = 0;
  double device_flops = 0;
  double cpu_adam_params_per_s = 0;
  double gpu_adam_params_per_s = 0;
  double nvme_read_bytes_per_s = 0, nvme_write_bytes_per_s = 0;
  std::vector<std::string> lines;  // "PCIe 12 GB/s per direction (default: not measured; ...)"
};

// `nvme`: the plan keeps state on the NVMe tier (its rates get a line).
ResolvedRates resolve_rates(const PlannerRates& rates, Precision precision, bool nvme = false);

struct StepTimeEstimate {
  double forward_s = 0;    // all micro-batches, transfers overlapped
  double backward_s = 0;   // all micro-batches, recomputation and transfers overlapped
  double optimizer_s = 0;  // the AdamW step and the weights' upload
  double compute_s = 0;    // pure compute (forward + backward + recompute), for comparison
  uint64_t host_to_device_bytes = 0;  // per step
  uint64_t device_to_host_bytes = 0;
  uint64_t nvme_bytes = 0;            // read + written per step
  // Busy time per resource in the step, and the one with the most: what bounds the step.
  double pcie_s = 0, cpu_adam_s = 0, nvme_s = 0;
  std::string bound;  // "compute", "PCIe", "CPU AdamW" or "NVMe"
  double total_s() const { return forward_s + backward_s + optimizer_s; }
};

// Fixed cost of one micro-batch per decoder layer (kernel launches, synchronisation), so that a
// larger micro-batch is preferred when everything else is equal.
inline constexpr double kMicroBatchLayerOverheadS = 100e-6;
// Fixed cost of offloading one layer's input per micro-batch (two copies, two events, the host
// buffer): so that a plan offloads activations only when that is what makes it fit.
inline constexpr double kActivationOffloadLayerOverheadS = 20e-6;

// What the step-time estimate needs per chunk, computed once per model shape so that the planner
// can price thousands of placement choices in milliseconds.
struct ChunkCost {
  double bytes = 0;           // the chunk's weights (tensors + padding)
  double grad_bytes = 0;      // gradients of its trainable parameters
  double trainable_bytes = 0; // = grad_bytes: the new weights the optimizer uploads
  double forward_flops = 0;   // per token
  double backward_flops = 0;  // per token, without recomputation
  std::vector<int64_t> layers;  // decoder layers whose recomputation is charged here
};

struct StepCostTable {
  std::vector<ChunkCost> chunks;
  double layer_forward_flops = 0;  // per token: what recomputing one layer costs
  double layer_input_bytes = 0;    // per token: a checkpointed layer's saved input (B, T, C)
  double trainable_parameters = 0;
  double seq_len = 0;
  int64_t num_layers = 0;
  bool lora = false;
  bool tied_embeddings = false;  // the LM head pages the embedding's chunk (chunk 0) in again
  bool overlap_step = false;     // TrainingShape::overlap_step
  double nvme_state_bytes = 0;   // the optimizer state on the NVMe tier (read and written each step)
  bool weights_on_nvme = false;  // offload.params_tier nvme: page-ins read the drive, AdamW rewrites it
};

StepCostTable build_step_cost_table(const MemoryModel& model);

// One step = grad_accumulation micro-batches of choice.micro_batch_size sequences of seq_len
// tokens, then the optimizer step.
StepTimeEstimate estimate_step_time(const StepCostTable& table, const PlacementChoice& choice,
                                    int64_t grad_accumulation, const ResolvedRates& rates);
StepTimeEstimate estimate_step_time(const MemoryModel& model, const PlacementChoice& choice,
                                    int64_t grad_accumulation, const ResolvedRates& rates);

// Forward FLOPs per token of each chunk of model.layout() (a layer's attention and adapters
// counted with the chunk holding its q_proj or qkv_proj; the LM head's with the final norm's chunk when tied).
std::vector<double> chunk_forward_flops_per_token(const MemoryModel& model);

}  // namespace ferry::offload
