// The end the trainer-driven stages share (see run_to_the_end.h).
#include "train/run_to_the_end.h"

#include <nlohmann/json.hpp>

#include <iostream>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/accountant.h"
#include "src/dist/communicator.h"
#include "train/model_setup.h"
#include "train/run_engine.h"
#include "train/stage_result.h"

namespace ferry {

TrainResult run_to_the_end(Trainer& trainer, const Config& config, const offload::ParameterEngine& engine, c10::Device device,
                           const std::string& stage, const std::string& unit,
                           const std::vector<std::string>& eval_values) {
  const int64_t processes = dist::read_dist_env().world_size;
  std::cout << stage << ": " << trainer.total_steps() << " steps of " << config.train.micro_batch_size << " x "
            << config.train.grad_accumulation << (processes > 1 ? " x " + std::to_string(processes) + " processes" : "")
            << " " << unit << "\n"
            << engine.memory_report().summary();
  const TrainResult result = trainer.run();
  if (result.interrupted()) {
    throw Interrupted(result.stop_signal, detail::concat(stage, ": interrupted after step ", result.steps,
                                                         "; resume with --set train.resume=auto"));
  }
  // One process writes final/ (the trainer's primary; the others would race it to the rename),
  // and none moves on (a pipeline's next stage reads final/) before it is written.
  if (!result.final_dir.empty() && dist::is_primary_process()) export_lora_final(result.final_dir, config);
  if (dist::Communicator* comm = dist::process_communicator(config.distributed); comm != nullptr && config.lora.rank > 0) {
    comm->barrier();
  }
  std::cout << stage << ": " << result.steps << " steps, last loss " << result.last_loss;
  if (result.eval_loss) {
    std::cout << ", eval loss " << *result.eval_loss;
    for (const std::string& name : eval_values) {
      if (const auto value = find_metric(result.eval_extra, name)) std::cout << ", eval " << name << " " << *value;
    }
  }
  std::cout << "\n";
  nlohmann::json figures{{"steps", result.steps}, {"last_loss", result.last_loss}};
  if (result.eval_loss) figures["eval_loss"] = *result.eval_loss;
  for (const MetricValue& value : result.eval_extra) figures["eval_" + value.name] = value.value;
  const offload::MemoryAccountant& memory = engine.accountant();
  const uint64_t device_peak = memory.peak(offload::MemoryTier::device), budget = config.offload.gpu_memory.bytes;
  figures["engine_device_peak_bytes"] = device_peak;
  figures["engine_device_weights_peak_bytes"] =
      memory.peak(offload::MemoryTier::device, offload::MemoryCategory::weights);
  // A CPU run meters activations on the emulated device (offload/activation_meter.h); a GPU run's
  // are in the CUDA allocator's peak.
  const bool metered = device.is_cpu();
  // Checkpointed layer inputs offloaded to the host (train.activation_offload).
  figures["engine_host_activations_peak_bytes"] = memory.peak(offload::MemoryTier::host, offload::MemoryCategory::activations);
  if (metered) {
    figures["engine_device_activations_peak_bytes"] =
        memory.peak(offload::MemoryTier::device, offload::MemoryCategory::activations);
  }
  std::cout << stage << ": engine peak "
            << (metered ? "(weights, gradients, optimizer state and activations, on the emulated device): "
                        : "(weights, gradients, optimizer state; activations not counted): ")
            << format_bytes_approx(device_peak) << " on the device (" << device_peak << " bytes), "
            << format_bytes_approx(memory.peak(offload::MemoryTier::host)) << " on the host\n";
  if (metered && budget > 0 && device_peak > budget) {
    std::cout << stage << ": warning: the emulated device peaked at " << format_bytes_approx(device_peak)
              << ", over offload.gpu_memory (" << format_bytes_approx(budget)
              << "): on a GPU of that size this run would run out of memory. offload.policy auto plans within the "
                 "budget; `ferry plan` shows what fits\n";
  }
  if (const uint64_t reserved = device_memory_peak(device); reserved > 0) {
    std::cout << stage << ": CUDA allocator peak (everything, activations included): " << format_bytes_approx(reserved)
              << " reserved on " << device.str() << "\n";
  }
  write_stage_result(config, figures.dump());
  return result;
}

}  // namespace ferry
