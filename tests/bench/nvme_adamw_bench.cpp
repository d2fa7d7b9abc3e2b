// The NVMe tier's AdamW throughput (offload/nvme_state_store.h): one AdamW step of a bf16 model's
// parameters with fp32 master weights and fp32 moments (12 bytes of state per parameter read and
// written back each step) streamed from a working file under --dir, against
//   the host tier: the same step with the state in memory (HostAdamState, the same kernel), and
//   the disk:      sequential direct-IO read and write bandwidth of --dir measured in the same run
//                  (offload/rate_probe.h, blocks of one window's record, 4 in flight); a step must read
//                  and write every state byte, so (bytes / read rate + bytes / write rate) is the
//                  shortest step the disk allows: its params/s is the bound.
// The first NVMe step writes the fresh state (nothing to read) and is not timed. Each of --reps
// timed steps is paired with a disk measurement just before it (the disk's rate drifts between
// runs on a VM or a laptop); the median pair's ratio is the figure. The host tier is the best of
// --reps steps.
//
//   nvme_adamw_bench --dir FOLDER [--params-m 100] [--window-m 1] [--reps 3] [--threads N]
//
// Prints "RESULT <what> <value>" lines and a summary.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "offload/direct_file.h"
#include "offload/host_adam_state.h"
#include "offload/nvme_state_store.h"
#include "offload/rate_probe.h"

namespace {

using namespace ferry;
using namespace ferry::offload;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Options {
  std::string dir;
  int64_t params = 100'000'000;
  int64_t window = 1 << 20;
  int reps = 3;
  int threads = 0;
  int depth = 2;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--dir") o.dir = value;
    else if (key == "--params-m") o.params = std::atoll(value) * 1'000'000;
    else if (key == "--window-m") o.window = std::atoll(value) << 20;
    else if (key == "--reps") o.reps = std::atoi(value);
    else if (key == "--threads") o.threads = std::atoi(value);
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  if (o.dir.empty()) {
    std::fprintf(stderr, "usage: nvme_adamw_bench --dir FOLDER [--params-m N] [--window-m N] [--reps N] [--threads N]\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  torch::NoGradGuard no_grad;
  kernels::ThreadPool pool(o.threads);
  const int64_t n = o.params;
  std::printf("nvme_adamw_bench: %.0f M parameters (bf16 weights, fp32 master and moments: 12 B/param of state), "
              "window %.1f M, %d threads, folder %s\n",
              n / 1e6, o.window / 1e6, pool.num_threads(), o.dir.c_str());
  const torch::Tensor weights = (torch::randn({n}) * 0.02).to(torch::kBFloat16);
  const torch::Tensor grad = (torch::randn({n}) * 1e-3).to(torch::kBFloat16);
  kernels::AdamWParams adamw;
  adamw.lr = 1e-4;
  adamw.weight_decay = 0.01;
  const StateLayout layout = state_layout(at::kBFloat16, MasterWeights::fp32, OptimizerState::fp32, 0);

  // Host tier: the whole state in memory.
  double host_rate = 0;
  {
    HostAdamState state;
    state.master = weights.to(torch::kFloat);
    state.exp_avg = torch::zeros({n});
    state.exp_avg_sq = torch::zeros({n});
    for (int r = 0; r < o.reps; ++r) {
      adamw.step = r + 1;
      const auto start = Clock::now();
      state.update(adamw, weights, grad, 1.0f, &pool);
      host_rate = std::max(host_rate, n / seconds_since(start));
    }
  }

  // NVMe tier, each timed step next to a measurement of the disk (a VM's or a laptop's disk drifts
  // between runs: the ratio is taken per pair, and the median pair reported).
  struct Pair {
    double nvme_rate, write_bw, read_bw, bound;
  };
  std::vector<Pair> pairs;
  uint64_t state_bytes = 0;
  bool direct = true;
  {
    NvmeOptions options;
    options.dir = o.dir;
    options.window = o.window;
    NvmeStateStore store(options);
    store.add(layout, n);
    store.seal();
    state_bytes = store.file_bytes();
    direct = store.direct();
    const auto step = [&] {
      store.for_each_window({0}, NvmeStateStore::Access::update, [&](const NvmeStateStore::Window& w, HostAdamState& s) {
        const torch::Tensor wv = window_weights(weights, w, s);
        s.update(adamw, wv, grad.narrow(0, w.first, w.size), 1.0f, &pool, w.first);
      });
    };
    adamw.step = 1;
    step();  // writes the fresh state: nothing to read yet
    const uint64_t block = round_up_to_alignment(static_cast<uint64_t>(o.window) * 12);
    const double bytes_per_param = static_cast<double>(state_bytes) / static_cast<double>(n);
    for (int r = 0; r < o.reps; ++r) {
      const DiskRates disk = sequential_disk_rates(o.dir, state_bytes, block, static_cast<size_t>(o.depth + 2), 1);
      adamw.step = r + 2;
      const auto start = Clock::now();
      step();
      const double rate = n / seconds_since(start);
      const double bound =
          1.0 / (bytes_per_param / disk.read_bytes_per_s + bytes_per_param / disk.write_bytes_per_s);
      pairs.push_back({rate, disk.write_bytes_per_s, disk.read_bytes_per_s, bound});
      std::printf("pair %d: disk write %.2f GB/s, read %.2f GB/s -> bound %.1f M params/s; NVMe tier %.1f M params/s "
                  "(%.0f%%)\n",
                  r + 1, disk.write_bytes_per_s / 1e9, disk.read_bytes_per_s / 1e9, bound / 1e6, rate / 1e6,
                  100 * rate / bound);
    }
  }
  std::sort(pairs.begin(), pairs.end(),
            [](const Pair& a, const Pair& b) { return a.nvme_rate / a.bound < b.nvme_rate / b.bound; });
  const Pair& median = pairs[pairs.size() / 2];
  const double bytes_per_param = static_cast<double>(state_bytes) / static_cast<double>(n);
  std::printf("RESULT disk_write_gbps %.3f\nRESULT disk_read_gbps %.3f\n", median.write_bw / 1e9, median.read_bw / 1e9);
  std::printf("RESULT host_adamw_mparams_per_s %.1f\nRESULT nvme_adamw_mparams_per_s %.1f\n", host_rate / 1e6,
              median.nvme_rate / 1e6);
  std::printf("RESULT disk_bound_mparams_per_s %.1f\n", median.bound / 1e6);
  std::printf("RESULT nvme_over_disk_bound %.3f\nRESULT nvme_over_host %.3f\n", median.nvme_rate / median.bound,
              median.nvme_rate / host_rate);
  std::printf("\n%s IO; state %.2f GB (%.2f B/param read and written per step); the median of %zu pairs:\n",
              direct ? "O_DIRECT" : "buffered", state_bytes / 1e9, bytes_per_param, pairs.size());
  std::printf("disk: write %.2f GB/s, read %.2f GB/s -> at most %.1f M params/s for a step that reads and writes the "
              "state\n", median.write_bw / 1e9, median.read_bw / 1e9, median.bound / 1e6);
  std::printf("AdamW step: host tier %.1f M params/s, NVMe tier %.1f M params/s = %.0f%% of the disk bound (target "
              ">= 70%%; worst pair %.0f%%), %.0f%% of the host tier\n",
              host_rate / 1e6, median.nvme_rate / 1e6, 100 * median.nvme_rate / median.bound,
              100 * pairs.front().nvme_rate / pairs.front().bound, 100 * median.nvme_rate / host_rate);
  return 0;
}
