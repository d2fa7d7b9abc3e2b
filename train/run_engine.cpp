// Engine set-up for a run: auto policy, GPU memory cap, and the memory plan the run keeps
// (output.dir/memory_plan.txt).
#include "train/run_engine.h"

#ifdef FERRY_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/auto_policy.h"
#include "offload/rate_probe.h"
#include "src/dist/communicator.h"

namespace ferry {

uint64_t device_memory_total(c10::Device device) {
#ifdef FERRY_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->totalGlobalMem;
#endif
  (void)device;
  return 0;
}

uint64_t device_memory_peak(c10::Device device) {
#ifdef FERRY_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return static_cast<uint64_t>(stats.reserved_bytes[0].peak);  // what the budget caps: all pools
  }
#endif
  (void)device;
  return 0;
}

namespace {

// The memory plan of a run whose policy was given, not planned: what the engine was told.
std::string configured_plan(const offload::EngineOptions& options, int64_t models) {
  std::string out = "offload.policy " + std::string(enum_name(options.policy)) + " (as configured; offload.policy auto " +
                    "plans it, and `ferry plan --config <this run's config.yaml>` prints the memory model's estimate)\n";
  if (options.device_budget > 0) out += "device budget: " + format_bytes_approx(options.device_budget) + "\n";
  if (options.host_budget > 0) out += "host budget: " + format_bytes_approx(options.host_budget) + "\n";
  if (models > 1) out += std::to_string(models) + " models share the engine\n";
  return out;
}

// output.dir/memory_plan.txt (ferry report shows it), written by the primary process only: the
// first engine this process sets up for the folder starts the file (a rerun or resume replaces
// it), later ones (an RL run's other models) are appended.
void write_memory_plan(const Config& config, const std::string& text) {
  if (config.output.dir.empty() || !dist::is_primary_process()) return;
  static std::set<std::string> started;
  const std::filesystem::path dir(config.output.dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const bool first = started.insert(std::filesystem::absolute(dir).lexically_normal().string()).second;
  std::ofstream out(dir / "memory_plan.txt", first ? std::ios::trunc : std::ios::app);
  if (out) out << text;
}

}  // namespace

std::unique_ptr<offload::ParameterEngine> make_run_engine(Config& config, const ModelShape& model, c10::Device device,
                                                 std::ostream& log, int64_t models) {
  const uint64_t total = device_memory_total(device);
  offload::EngineOptions options = offload::EngineOptions::from_config(config);
  std::string plan_text;
  if (config.offload.policy == OffloadPolicy::auto_) {
    std::optional<offload::PlannerRates> rates;
    if (device.is_cuda()) {  // the plan's cost model with this machine's rates (well under a second)
      offload::PlannerRates configured;
      configured.pcie_gbps = config.offload.pcie_bandwidth_gbps;
      rates = offload::measure_rates(configured, device, config.train.precision, config.offload.cpu_threads);
      for (const std::string& line : offload::resolve_rates(*rates, config.train.precision).lines) {
        log << "offload.policy auto: " << line << "\n";
      }
#ifdef FERRY_WITH_CUDA
      // The probe's buffers go back to the device, and the run's peak starts from here.
      const c10::DeviceIndex index = device.index() < 0 ? 0 : device.index();
      c10::cuda::CUDACachingAllocator::emptyCache();
      c10::cuda::CUDACachingAllocator::resetPeakStats(index);
#endif
    }
    Config planning = config;
    if (models > 1) {
      const uint64_t whole = config.offload.gpu_memory.bytes > 0 ? config.offload.gpu_memory.bytes : total;
      planning.offload.gpu_memory.bytes = whole / static_cast<uint64_t>(models);
      log << "offload.policy auto: " << models << " models share the budget; planning each within "
          << format_bytes_approx(planning.offload.gpu_memory.bytes) << "\n";
    }
    std::optional<offload::AutoPolicy> plan;
    try {
      plan = offload::resolve_auto_policy(planning, model, total, rates);
    } catch (const ConfigError& e) {
      if (models <= 1) throw;
      // The models do not each fit a share of the budget; together they still fit one at a time
      // when every group is paged (params), which is what the stage then gets.
      log << "offload.policy auto: no plan fits each of the " << models << " models in its share; every group is "
          << "paged (offload.policy params), so the budget must hold one model's working set\n";
    }
    if (plan) {
      log << plan->summary << "\n";
      plan_text = plan->summary + "\n";
      options = plan->options;
      config.train.micro_batch_size = plan->micro_batch_size;
      config.train.grad_accumulation = plan->grad_accumulation;
    } else {
      options.policy = OffloadPolicy::params;
      options.kept_groups.clear();
    }
    options.device_budget = offload::EngineOptions::from_config(config).device_budget;
  }
  const uint64_t budget = config.offload.gpu_memory.bytes;
  if (budget > 0 && total > 0) {
    if (budget > total) {
      throw ConfigError("offload.gpu_memory: " + format_bytes_approx(budget) + " is more than the GPU's " +
                        format_bytes_approx(total) + "; use 0 for the whole device or a smaller budget");
    }
#ifdef FERRY_WITH_CUDA
    const double fraction = static_cast<double>(budget) / static_cast<double>(total);
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device.index() < 0 ? 0 : device.index());
    log << "offload.gpu_memory: the caching allocator is capped at " << format_bytes_approx(budget) << " of "
        << format_bytes_approx(total) << "\n";
#endif
  }
  options.device = device;
  write_memory_plan(config, plan_text.empty() ? configured_plan(options, models) : plan_text);
  // A data-parallel run: the engine sums gradients over the processes and shards what
  // distributed.zero_stage says.
  options.shard_group = dist::process_communicator(config.distributed);
  options.zero_stage = config.distributed.zero_stage;
  return offload::make_parameter_engine(options);
}

}  // namespace ferry
