// The c10d process group behind Communicator (see communicator.h).
#include "src/dist/communicator.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <streambuf>

#include "core/error.h"

#ifdef FERRY_WITH_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#ifdef FERRY_WITH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <ATen/ATen.h>

namespace ferry::dist {

#ifdef FERRY_WITH_GLOO
namespace {

constexpr int64_t kBucketBytes = 32ll << 20;

std::chrono::milliseconds as_duration(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

struct Communicator::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;  // CPU tensors (and CUDA ones without NCCL)
#ifdef FERRY_WITH_NCCL
  // CUDA tensors, on the GPUs themselves: when every process of this machine has a GPU of its own.
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
};
#else
struct Communicator::Group {};
#endif

Communicator::Communicator(DistEnv env, double timeout_seconds, std::unique_ptr<Group> group)
    : env_(std::move(env)), timeout_seconds_(timeout_seconds), group_(std::move(group)) {}

Communicator::~Communicator() = default;

void Communicator::fail(const std::string& what, const std::exception& cause) const {
  throw PeerError(detail::concat(
      "rank ", env_.rank, " of ", env_.world_size, ": ", what, " failed: ", cause.what(),
      "\nanother process of this run stopped or did not answer within distributed.timeout (", timeout_seconds_,
      " s): its own output says why (`ferry launch` names the first process that failed)"));
}

std::unique_ptr<Communicator> Communicator::join(const DistEnv& env, double timeout_seconds) {
#ifdef FERRY_WITH_GLOO
  auto group = std::make_unique<Group>();
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(env.master_port);
    options.isServer = env.rank == 0;
    options.numWorkers = static_cast<int>(env.world_size);
    options.waitWorkers = true;
    options.timeout = as_duration(timeout_seconds);
    group->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(as_duration(timeout_seconds));
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    group->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", group->store),
                                                              static_cast<int>(env.rank),
                                                              static_cast<int>(env.world_size), gloo_options);
#ifdef FERRY_WITH_NCCL
    const int64_t gpus = c10::cuda::device_count();
    if (gpus > 0 && env.local_world_size <= gpus) {
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = as_duration(timeout_seconds);
      group->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("nccl", group->store),
                                                                static_cast<int>(env.rank),
                                                                static_cast<int>(env.world_size), nccl_options);
    }
#endif
  } catch (const std::exception& e) {
    throw PeerError(detail::concat("rank ", env.rank, " of ", env.world_size, ": joining the process group at ",
                                   env.master_addr, ":", env.master_port, " failed: ", e.what(),
                                   "\ncheck that every process was started (WORLD_SIZE ", env.world_size,
                                   ") with the same MASTER_ADDR and MASTER_PORT, and that the port is free"));
  }
  return std::unique_ptr<Communicator>(new Communicator(env, timeout_seconds, std::move(group)));
#else
  (void)timeout_seconds;
  throw ConfigError(detail::concat("WORLD_SIZE=", env.world_size,
                                   ": this Ferry was built without the Gloo headers data-parallel runs need; install "
                                   "them (apt-get install libgloo-dev) and rebuild, or run one process"));
#endif
}

void Communicator::all_reduce_sum(const std::vector<at::Tensor>& tensors) {
  run_bucketed(tensors, Collective::all_reduce, 0);
}

void Communicator::reduce_sum(const std::vector<at::Tensor>& tensors, int64_t root) {
  run_bucketed(tensors, Collective::reduce, root);
}

void Communicator::broadcast(const std::vector<at::Tensor>& tensors, int64_t root) {
  run_bucketed(tensors, Collective::broadcast, root);
}

void Communicator::run_bucketed(const std::vector<at::Tensor>& tensors, Collective collective, int64_t root) {
#ifdef FERRY_WITH_GLOO
  const char* name = collective == Collective::all_reduce ? "all-reduce"
                     : collective == Collective::reduce   ? "reduce"
                                                          : "broadcast";
  size_t i = 0;
  while (i < tensors.size()) {
    // One bucket: consecutive tensors of one dtype up to kBucketBytes (a larger tensor alone).
    const at::ScalarType dtype = tensors[i].scalar_type();
    std::vector<at::Tensor> bucket;
    int64_t bytes = 0;
    while (i < tensors.size() && tensors[i].scalar_type() == dtype &&
           (bucket.empty() || bytes + static_cast<int64_t>(tensors[i].nbytes()) <= kBucketBytes)) {
      bytes += static_cast<int64_t>(tensors[i].nbytes());
      bucket.push_back(tensors[i++]);
    }
    payload_bytes_ += static_cast<uint64_t>(bytes);
    // CUDA tensors stay on the GPU under NCCL; everything else goes through Gloo on the host.
    c10d::Backend* backend = group_->gloo.get();
    bool on_gpu = false;
#ifdef FERRY_WITH_NCCL
    if (group_->nccl) {
      on_gpu = true;
      for (const at::Tensor& t : bucket) on_gpu = on_gpu && t.is_cuda();
      if (on_gpu) backend = group_->nccl.get();
    }
#endif
    const bool in_place = bucket.size() == 1 && bucket[0].is_contiguous() && (bucket[0].is_cpu() || on_gpu);
    at::Tensor flat;
    if (in_place) {
      flat = bucket[0].view({-1});
    } else {
      std::vector<at::Tensor> parts;
      for (const at::Tensor& t : bucket) parts.push_back(on_gpu ? t.reshape({-1}) : t.reshape({-1}).to(at::kCPU));
      flat = at::cat(parts);
    }
    std::vector<at::Tensor> list{flat};
    try {
      c10::intrusive_ptr<c10d::Work> work;
      if (collective == Collective::all_reduce) {
        work = backend->allreduce(list);
      } else if (collective == Collective::reduce) {
        c10d::ReduceOptions options;
        options.rootRank = root;
        work = backend->reduce(list, options);
      } else {
        c10d::BroadcastOptions options;
        options.rootRank = root;
        work = backend->broadcast(list, options);
      }
      // Gloo: the host waits; NCCL: the current CUDA stream waits, so the copies below follow it.
      work->wait(as_duration(timeout_seconds_));
    } catch (const std::exception& e) {
      fail(std::string(name) + " of " + std::to_string(bucket.size()) + " tensor(s)", e);
    }
    // Only the root's tensors receive a reduce; a broadcast's root keeps its own.
    const bool receives = collective == Collective::all_reduce ||
                          (collective == Collective::reduce ? env_.rank == root : env_.rank != root);
    if (in_place || !receives) continue;
    int64_t offset = 0;
    for (const at::Tensor& t : bucket) {
      const int64_t n = t.numel();
      t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
#else
  (void)tensors;
  (void)collective;
  (void)root;
#endif
}

std::vector<at::Tensor> Communicator::all_gather(const at::Tensor& input) {
#ifdef FERRY_WITH_GLOO
  // As bytes: Gloo gathers those whatever the tensor's dtype (it refuses some, e.g. int16).
  std::vector<at::Tensor> inputs{input.contiguous().reshape({-1}).view(at::kByte)};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int64_t r = 0; r < env_.world_size; ++r) outputs[0].push_back(at::empty_like(inputs[0]));
  payload_bytes_ += static_cast<uint64_t>(input.nbytes());
  try {
    group_->gloo->allgather(outputs, inputs)->wait(as_duration(timeout_seconds_));
  } catch (const std::exception& e) {
    fail("all-gather of " + std::to_string(input.nbytes()) + " bytes", e);
  }
  std::vector<at::Tensor> gathered;
  for (const at::Tensor& bytes : outputs[0]) gathered.push_back(bytes.view(input.scalar_type()).view(input.sizes()));
  return gathered;
#else
  return {input};
#endif
}

void Communicator::barrier() {
#ifdef FERRY_WITH_GLOO
  try {
    group_->gloo->barrier()->wait(as_duration(timeout_seconds_));
  } catch (const std::exception& e) {
    fail("barrier", e);
  }
#endif
}

namespace {

// Discards everything written to it: std::cout of the processes other than rank 0.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace

Communicator* process_communicator(const DistributedConfig& config) {
  static std::mutex mutex;
  static bool joined = false;
  static std::unique_ptr<Communicator> communicator;
  std::lock_guard<std::mutex> lock(mutex);
  if (joined) return communicator.get();
  const DistEnv env = read_dist_env();
  if (env.distributed()) communicator = Communicator::join(env, config.timeout);
  joined = true;
  return communicator.get();
}

void quiet_unless_primary() {
  // Never destroyed: std::cout is flushed at exit after every function-local static is gone, and
  // a destroyed buffer there crashed the other ranks' exit (found by AddressSanitizer).
  static NullBuffer* const null_buffer = new NullBuffer;
  const char* world = std::getenv("WORLD_SIZE");
  const char* rank = std::getenv("RANK");
  // Only the variables' presence matters here; read_dist_env checks their values when joining.
  if (world != nullptr && rank != nullptr && std::string(world) != "1" && std::string(rank) != "0") {
    std::cout.rdbuf(null_buffer);
  }
}

bool is_primary_process() { return read_dist_env().rank == 0; }

bool nccl_compiled_in() {
#ifdef FERRY_WITH_NCCL
  return true;
#else
  return false;
#endif
}

bool gloo_compiled_in() {
#ifdef FERRY_WITH_GLOO
  return true;
#else
  return false;
#endif
}

}  // namespace ferry::dist
