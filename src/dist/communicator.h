// Communicator: the process group of a data-parallel run and the collectives Ferry uses, on
// PyTorch's own c10d: a TCPStore rendezvous at MASTER_ADDR:MASTER_PORT (hosted by rank 0) and
// ProcessGroupGloo (CPU tensors; CUDA tensors go through host copies). c10d stays inside
// communicator.cpp: this header needs no Gloo or c10d headers.
//
// Every collective waits at most distributed.timeout; a peer that died or stopped answering makes
// it throw PeerError naming this rank, the collective and what to check.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/config/config.h"
#include "src/dist/dist_env.h"

namespace ferry::dist {

class Communicator {
 public:
  // Joins the group `env` describes. ConfigError when this build has no Gloo (libgloo-dev headers
  // missing at build time); PeerError when the others do not join within `timeout_seconds`.
  static std::unique_ptr<Communicator> join(const DistEnv& env, double timeout_seconds);
  ~Communicator();

  int64_t rank() const { return env_.rank; }
  int64_t size() const { return env_.world_size; }
  const DistEnv& env() const { return env_; }

  // Sums each tensor over the processes, in place. Tensors of one dtype are packed into buckets
  // of up to 32 MiB per collective; every process must pass the same list (names, shapes, order).
  void all_reduce_sum(const std::vector<at::Tensor>& tensors);
  // Waits until every process has called it.
  void barrier();

  struct Group;  // the c10d objects (communicator.cpp)

 private:
  Communicator(DistEnv env, double timeout_seconds, std::unique_ptr<Group> group);
  [[noreturn]] void fail(const std::string& what, const std::exception& cause) const;

  DistEnv env_;
  double timeout_seconds_ = 0;
  std::unique_ptr<Group> group_;
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

// Whether this process is rank 0 (or alone): the one that writes logs, checkpoints and exports.
// Reads the environment only; joins nothing.
bool is_primary_process();

}  // namespace ferry::dist
