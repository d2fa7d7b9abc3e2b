// Quick measurements of CPU AdamW, PCIe and device matmul rates for the planner.
#include "offload/rate_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/thread_pool.h"
#include "offload/direct_file.h"
#include "offload/io_threads.h"

namespace ferry::offload {
namespace {

double best_seconds(int reps, const std::function<void()>& fn, const std::function<void()>& sync) {
  fn();  // warm-up: first-touch pages, kernels, clocks
  sync();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    sync();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

double cpu_adam_params_per_s(int64_t cpu_threads) {
  constexpr int64_t n = int64_t(8) << 20;
  std::vector<float> master(n, 0.5f), exp_avg(n, 0.0f), exp_avg_sq(n, 0.0f), grad(n, 0.01f);
  std::unique_ptr<kernels::ThreadPool> own;
  kernels::ThreadPool* pool = &kernels::default_thread_pool();
  if (cpu_threads > 0) {
    own = std::make_unique<kernels::ThreadPool>(static_cast<int>(cpu_threads));
    pool = own.get();
  }
  kernels::AdamWParams params;
  params.lr = 1e-4;
  params.weight_decay = 0.01;
  int64_t step = 0;
  const double seconds = best_seconds(
      3,
      [&] {
        params.step = ++step;
        kernels::adamw_update(params, master.data(), exp_avg.data(), exp_avg_sq.data(), grad.data(),
                              kernels::GradType::f32, 1.0f, nullptr, kernels::WeightOutType::none, n, pool);
      },
      [] {});
  return static_cast<double>(n) / seconds;
}

}  // namespace

DiskRates sequential_disk_rates(const std::string& folder, uint64_t bytes, uint64_t block, size_t in_flight, int reps) {
  DirectFile file(folder);
  file.reserve(bytes);
  IoThreads io(static_cast<int>(in_flight));
  std::vector<AlignedBuffer> buffers;
  for (size_t i = 0; i < in_flight; ++i) buffers.push_back(aligned_buffer(block));
  const auto pass = [&](bool write) {
    std::vector<std::future<void>> pending(in_flight);
    for (uint64_t at = 0, i = 0; at < bytes; at += block, ++i) {
      std::future<void>& slot = pending[i % in_flight];
      if (slot.valid()) slot.get();
      std::byte* buffer = buffers[i % in_flight].get();
      slot = io.submit([&file, buffer, at, block, write] {
        if (write) file.write(at, buffer, block);
        else file.read(at, buffer, block);
      });
    }
    for (auto& f : pending) {
      if (f.valid()) f.get();
    }
  };
  const double write = best_seconds(reps, [&] { pass(true); }, [] {});
  const double read = best_seconds(reps, [&] { pass(false); }, [] {});
  return {static_cast<double>(bytes) / write, static_cast<double>(bytes) / read};
}

PlannerRates measure_rates(const PlannerRates& configured, c10::Device device, Precision precision,
                           int64_t cpu_threads, const std::string& nvme_dir) {
  PlannerRates rates = configured;
  if (!nvme_dir.empty() && (rates.nvme_read_gbps <= 0 || rates.nvme_write_gbps <= 0)) {
    const DiskRates disk = sequential_disk_rates(nvme_dir, uint64_t{512} << 20, uint64_t{16} << 20, 4, 2);
    rates.nvme_write_gbps = disk.write_bytes_per_s / 1e9;
    rates.nvme_read_gbps = disk.read_bytes_per_s / 1e9;
    rates.nvme_source = std::string("measured here: ") + nvme_dir + ", direct IO";
  }
  if (rates.cpu_adam_params_per_s <= 0) {
    rates.cpu_adam_params_per_s = cpu_adam_params_per_s(cpu_threads);
    rates.cpu_adam_source = "measured here";
  }
  if (!device.is_cuda()) return rates;
  torch::NoGradGuard no_grad;
  const auto sync = [] { torch::cuda::synchronize(); };
  if (rates.pcie_gbps <= 0) {
    constexpr int64_t bytes = int64_t(256) << 20;
    const torch::Tensor host = torch::empty({bytes}, torch::TensorOptions(torch::kUInt8).pinned_memory(true));
    const torch::Tensor on_device = torch::empty({bytes}, torch::TensorOptions(torch::kUInt8).device(device));
    const double up = best_seconds(3, [&] { on_device.copy_(host, /*non_blocking=*/true); }, sync);
    const double down = best_seconds(3, [&] { host.copy_(on_device, /*non_blocking=*/true); }, sync);
    rates.pcie_gbps = static_cast<double>(bytes) / std::max(up, down) / 1e9;  // the slower direction
    rates.pcie_source = "measured here, pinned copies";
  }
  if (rates.device_tflops <= 0) {
    constexpr int64_t n = 4096;
    const auto dtype = precision == Precision::fp32 ? torch::kFloat : precision == Precision::fp16 ? torch::kHalf
                                                                                                  : torch::kBFloat16;
    const torch::Tensor a = torch::randn({n, n}, torch::TensorOptions(dtype).device(device));
    const torch::Tensor b = torch::randn({n, n}, torch::TensorOptions(dtype).device(device));
    torch::Tensor c;
    const double seconds = best_seconds(5, [&] { c = torch::mm(a, b); }, sync);
    rates.device_tflops = 2.0 * n * n * n / seconds / 1e12;
    rates.device_source = "measured here, 4096² matmul";
  }
  return rates;
}

}  // namespace ferry::offload
