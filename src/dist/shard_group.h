// ShardGroup: the processes a data-parallel engine shards its state over (ZeRO,
// distributed.zero_stage) and the collectives it needs from them. Communicator (communicator.h) is
// the one a run uses (c10d); the engine only sees this interface.
//
// Ownership: the engine splits what it trains into units (a trainable chunk under the offloading
// policies, a trainable tensor under `none`) and gives each unit one owner, the process that
// holds the unit's optimizer state and updates it (stage 1), and that alone receives the unit's
// summed gradients (stage 2). Every process computes the same owners from the same units.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ferry::dist {

class ShardGroup {
 public:
  virtual ~ShardGroup() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  // Every process passes the same list: the same shapes and dtypes in the same order, on the same
  // kind of device (CUDA tensors may go through NCCL, CPU tensors through Gloo).
  // Sums each tensor over the processes, in place.
  virtual void all_reduce_sum(const std::vector<at::Tensor>& tensors) = 0;
  // Sums each tensor over the processes into `root`'s tensors; the others' are left unspecified.
  virtual void reduce_sum(const std::vector<at::Tensor>& tensors, int64_t root) = 0;
  // Copies `root`'s tensors into every other process's.
  virtual void broadcast(const std::vector<at::Tensor>& tensors, int64_t root) = 0;
};

// The owner of each unit: largest first, each unit goes to the process that owns the fewest bytes
// so far (the lowest rank on a tie). `owned` holds each process's bytes before and after (one entry
// per process), so that the units of several models added one after the other balance together.
std::vector<int64_t> assign_owners(const std::vector<uint64_t>& unit_bytes, std::vector<uint64_t>& owned);

// A tensor and the process that owns it.
struct OwnedTensor {
  at::Tensor tensor;
  int64_t owner = 0;
};

// For each process in rank order, one reduce_sum of the tensors it owns onto it.
void reduce_to_owners(ShardGroup& group, const std::vector<OwnedTensor>& tensors);
// For each process in rank order, one broadcast of the tensors it owns from it.
void broadcast_from_owners(ShardGroup& group, const std::vector<OwnedTensor>& tensors);
// Each of `values` summed over the processes of `group`, in place, in double and in one collective
// (none when `group` is null or holds one process). Every process passes as many values.
void sum_over_processes(const std::vector<double*>& values, ShardGroup* group);
// `value` summed over the processes (in double).
double sum_over_processes(ShardGroup& group, double value);

}  // namespace ferry::dist
