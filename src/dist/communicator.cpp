// The c10d process group behind Communicator (see communicator.h).
#include "src/dist/communicator.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <streambuf>

#include "src/core/error.h"

#ifdef FERRY_WITH_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
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
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
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
    group->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(group->store, static_cast<int>(env.rank),
                                                              static_cast<int>(env.world_size), gloo_options);
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
#ifdef FERRY_WITH_GLOO
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
    const bool in_place = bucket.size() == 1 && bucket[0].is_cpu() && bucket[0].is_contiguous();
    at::Tensor flat;
    if (in_place) {
      flat = bucket[0].view({-1});
    } else {
      std::vector<at::Tensor> parts;
      for (const at::Tensor& t : bucket) parts.push_back(t.reshape({-1}).to(at::kCPU));
      flat = at::cat(parts);
    }
    std::vector<at::Tensor> list{flat};
    try {
      group_->gloo->allreduce(list)->wait(as_duration(timeout_seconds_));
    } catch (const std::exception& e) {
      fail("all-reduce of " + std::to_string(bucket.size()) + " tensor(s)", e);
    }
    if (in_place) continue;
    int64_t offset = 0;
    for (const at::Tensor& t : bucket) {
      const int64_t n = t.numel();
      t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
#else
  (void)tensors;
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
  static NullBuffer null_buffer;
  const char* world = std::getenv("WORLD_SIZE");
  const char* rank = std::getenv("RANK");
  // Only the variables' presence matters here; read_dist_env checks their values when joining.
  if (world != nullptr && rank != nullptr && std::string(world) != "1" && std::string(rank) != "0") {
    std::cout.rdbuf(&null_buffer);
  }
}

bool is_primary_process() { return read_dist_env().rank == 0; }

bool gloo_compiled_in() {
#ifdef FERRY_WITH_GLOO
  return true;
#else
  return false;
#endif
}

}  // namespace ferry::dist
