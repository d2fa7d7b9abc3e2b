// Measures the rates the planner's cost model needs on this machine, in well under a second:
//   CPU AdamW   CpuAdamW on 8M parameters (state larger than the caches), best of three;
//   PCIe        pinned host <-> device copies of 256 MiB, each direction, best of three (GPU only);
//   device      a 4096² matmul in the run's precision, best of five (GPU only).
// Rates the config already sets (offload.pcie_bandwidth_gbps) are kept, not measured. Used by
// offload.policy auto on a GPU and by `ferry plan --measure`; without a GPU only the CPU AdamW
// rate is measured (the others keep the defaults of planner_cost.h).
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "offload/planner_cost.h"

namespace ferry::offload {

// Sequential direct-IO write then read of a fresh working file of `bytes` in `folder` (a multiple of
// `block`, itself of kDirectIoAlignment), `in_flight` blocks at a time, best of `reps` passes each
// after a warm-up pass: bytes per second.
struct DiskRates {
  double write_bytes_per_s = 0;
  double read_bytes_per_s = 0;
};
DiskRates sequential_disk_rates(const std::string& folder, uint64_t bytes, uint64_t block, size_t in_flight, int reps);

// `configured`: rates already known (non-zero ones are kept). `cpu_threads`: offload.cpu_threads.
// `nvme_dir` (offload.nvme_dir with the state on the NVMe tier; empty: none): its sequential
// direct-IO write and read rates, 512 MiB in 16 MiB blocks, 4 in flight (offload/direct_file.h).
PlannerRates measure_rates(const PlannerRates& configured, c10::Device device, Precision precision,
                           int64_t cpu_threads, const std::string& nvme_dir = "");

}  // namespace ferry::offload
