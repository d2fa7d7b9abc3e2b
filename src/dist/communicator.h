// Communicator: the process group of a data-parallel run and the collectives Ferry uses, on
// PyTorch's own c10d: a TCPStore rendezvous at MASTER_ADDR:MASTER_PORT (hosted by rank 0),
// ProcessGroupGloo for CPU tensors and, in a CUDA build where every process of a machine has a
// GPU of its own (LOCAL_WORLD_SIZE <= the visible GPUs), ProcessGroupNCCL for CUDA tensors, which
// then never leave the GPUs; otherwise CUDA tensors go through host copies and Gloo. c10d stays
// inside communicator.cpp: this header needs no Gloo, NCCL or c10d headers.
//
// Every collective waits at most distributed.timeout; a peer that died or stopped answering makes
// it throw PeerError naming this rank, the collective and what to check.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "src/dist/dist_env.h"
#include "src/dist/shard_group.h"

namespace ferry::dist {

class Communicator : public dist::ShardGroup {
 public:
  // Joins the group `env` describes. ConfigError when this build has no Gloo (libgloo-dev headers
  // missing at build time); PeerError when the others do not join within `timeout_seconds`.
  static std::unique_ptr<Communicator> join(const DistEnv& env, double timeout_seconds);
  ~Communicator() override;

  int64_t rank() const override { return env_.rank; }
  int64_t size() const override { return env_.world_size; }
  const DistEnv& env() const { return env_; }

  // The collectives of dist::ShardGroup. Tensors of one dtype are packed into buckets of up to
  // 32 MiB per collective; every process must pass the same list (names, shapes, order).
  void all_reduce_sum(const std::vector<at::Tensor>& tensors) override;
  void reduce_sum(const std::vector<at::Tensor>& tensors, int64_t root) override;
  void broadcast(const std::vector<at::Tensor>& tensors, int64_t root) override;
  // Every process's `input` (a CPU tensor of the same shape and dtype everywhere), by rank.
  std::vector<at::Tensor> all_gather(const at::Tensor& input);
  // Waits until every process has called it.
  void barrier();

  // Bytes of the tensors this process has handed to collectives so far (their payload; a ring
  // all-reduce sends about twice that over the wire, a reduce or a broadcast about once).
  uint64_t payload_bytes() const { return payload_bytes_; }

  struct Group;  // the c10d objects (communicator.cpp)

 private:
  Communicator(DistEnv env, double timeout_seconds, std::unique_ptr<Group> group);
  [[noreturn]] void fail(const std::string& what, const std::exception& cause) const;
  enum class Collective { all_reduce, reduce, broadcast };
  void run_bucketed(const std::vector<at::Tensor>& tensors, Collective collective, int64_t root);

  DistEnv env_;
  double timeout_seconds_ = 0;
  std::unique_ptr<Group> group_;
  uint64_t payload_bytes_ = 0;
};

// This process's communicator: on the first call it reads the environment (read_dist_env) and,
// for a multi-process run, joins with config.timeout; later calls return the same one. nullptr
// for a single process.
Communicator* process_communicator(const DistributedConfig& config);

// In a process other than rank 0 of a multi-process run, std::cout writes nothing from now on:
// rank 0 reports for the run (errors still go to std::cerr). The CLI calls it first thing.
void quiet_unless_primary();

// Whether this build can join a process group (it was compiled with the Gloo headers).
bool gloo_compiled_in();
// Whether this build sums CUDA tensors with NCCL (a CUDA build that found nccl.h).
bool nccl_compiled_in();

// Whether this process is rank 0 (or alone): the one that writes logs, checkpoints and exports.
// Reads the environment only; joins nothing.
bool is_primary_process();

}  // namespace ferry::dist
