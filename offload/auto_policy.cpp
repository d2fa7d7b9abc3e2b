// The planner's choice as engine options.
#include "offload/auto_policy.h"

#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "src/dist/dist_env.h"
#include "src/io/model_path.h"
#include "src/model/quantized_base.h"

namespace ferry::offload {
namespace {

std::string group_name(int64_t group, const ModelShape& model) {
  if (group == embedding_group()) return "embed";
  if (group == head_group(model)) return "head";
  return "layers." + std::to_string(group - 1);
}

}  // namespace

bool keeps_cpu_optimizer_state(const OffloadConfig& offload) {
  return offload.optimizer_state == OptimizerState::int8 || offload.master_weights != MasterWeights::fp32 ||
         offload.optimizer_state_tier == StateTier::nvme || offload.params_tier == StateTier::nvme;
}

PlannerRequest planner_request(const Config& config, const ModelShape& model, uint64_t device_budget) {
  PlannerRequest request;
  request.shape.model = model;
  request.shape.precision = config.train.precision;
  request.shape.seq_len = config.data.max_length;
  request.shape.grad_accumulation = config.train.grad_accumulation;
  request.shape.lora_rank = config.lora.rank;
  request.shape.overlap_step = config.offload.overlap_step;
  request.shape.logits_chunk = config.train.logits_chunk;
  if (config.offload.optimizer_state == OptimizerState::int8) request.shape.moments = MomentFormat::int8;
  if (config.offload.master_weights != MasterWeights::fp32) {
    request.shape.master = config.offload.master_weights == MasterWeights::bf16_kahan ? MasterFormat::bf16_kahan
                                                                                      : MasterFormat::bf16_stochastic;
  }
  request.shape.state_on_nvme = config.offload.optimizer_state_tier == StateTier::nvme;
  request.shape.weights_on_nvme = config.offload.params_tier == StateTier::nvme;
  // State only the CPU optimizer keeps: the plan offloads it.
  if (keeps_cpu_optimizer_state(config.offload)) request.policies = {OffloadPolicy::optimizer, OffloadPolicy::params};
  request.shape.lora_targets = config.lora.target_modules;
  request.shape.lora_dropout = config.lora.dropout;
  request.shape.base = base_format(config.lora.quantize_base, config.lora.double_quant);
  if (request.shape.base == BaseFormat::gguf) {  // the file's own types, projection by projection
    request.shape.stored_base_bytes = gguf_projection_bytes(io::resolve_model_path(config.model.path));
  }
  // A data-parallel run (torchrun / `ferry launch`) plans one process's share.
  request.shape.processes = dist::read_dist_env().world_size;
  request.shape.zero_stage = config.distributed.zero_stage;
  request.activation_offload = config.train.activation_offload;
  request.constants.chunk_size = config.offload.chunk_size.bytes;
  request.constants.prefetch = config.offload.prefetch;
  request.rates.pcie_gbps = config.offload.pcie_bandwidth_gbps;
  request.device_budget = device_budget;
  request.host_budget = resolve_host_budget(config.offload.host_memory.bytes);
  request.micro_batch_size = config.train.micro_batch_size;
  if (config.offload.policy != OffloadPolicy::auto_) {
    request.policies = {config.offload.policy};
    request.search_micro_batch = false;
    request.search_checkpointing = false;
    request.gradient_checkpointing = config.train.gradient_checkpointing;
    request.search_activation_offload = false;
    request.search_kept_chunks = false;
  }
  if (request.shape.seq_len <= 0 || request.micro_batch_size <= 0 || request.shape.grad_accumulation <= 0) {
    throw ConfigError("data.max_length, train.micro_batch_size and train.grad_accumulation must be positive");
  }
  return request;
}

AutoPolicy resolve_auto_policy(const Config& config, const ModelShape& model, uint64_t device_bytes,
                               const std::optional<PlannerRates>& rates) {
  AutoPolicy out;
  out.options = EngineOptions::from_config(config);
  out.micro_batch_size = config.train.micro_batch_size;
  out.grad_accumulation = config.train.grad_accumulation;
  const uint64_t budget = config.offload.gpu_memory.bytes > 0 ? config.offload.gpu_memory.bytes : device_bytes;
  if (budget == 0) {
    // State only the CPU optimizer keeps asks for an offloading policy even with nothing to fit.
    const bool host_state = keeps_cpu_optimizer_state(config.offload);
    out.options.policy = host_state ? OffloadPolicy::optimizer : OffloadPolicy::none;
    out.summary = host_state ? "offload.policy auto: no GPU and no offload.gpu_memory, so nothing to fit: policy "
                               "optimizer (the configured host optimizer state needs the CPU optimizer)"
                             : "offload.policy auto: no GPU and no offload.gpu_memory, so nothing to fit: policy none";
    return out;
  }
  PlannerRequest request = planner_request(config, model, budget);
  if (rates) request.rates = *rates;
  if (device_bytes == 0) request.constants.device_overhead_bytes = 0;  // emulated device: no CUDA context
  const PlanResult result = plan(request);
  if (!result.best) throw ConfigError("offload.policy auto: " + explain_no_fit(request, result));
  const Plan& chosen = *result.best;
  const MemoryModel memory(request.shape, request.constants);

  out.options.policy = chosen.choice.policy;
  out.options.device_budget = budget;
  out.micro_batch_size = chosen.choice.micro_batch_size;
  out.grad_accumulation = chosen.grad_accumulation;
  const auto& chunks = memory.layout().chunks();
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (c < chosen.choice.chunk_on_device.size() && chosen.choice.chunk_on_device[c]) {
      for (int64_t g = chunks[c].first_group; g <= chunks[c].last_group; ++g) {
        out.options.kept_groups.push_back(group_name(g, model));
      }
    }
  }
  out.options.activation_offload = chosen.choice.activation_offload;
  for (size_t layer = 0; layer < chosen.choice.layer_checkpointed.size(); ++layer) {
    if (chosen.choice.layer_checkpointed[layer]) out.options.recompute_layers.push_back(static_cast<int64_t>(layer));
  }
  std::ostringstream summary;
  summary << "offload.policy auto: " << enum_name(chosen.choice.policy) << " within " << format_bytes_approx(budget)
          << " (estimated " << format_bytes_approx(chosen.memory.device_total()) << " on the device; "
          << describe_kept_chunks(memory, chosen.choice) << "; " << chosen.describe_checkpointing();
  if (out.micro_batch_size != config.train.micro_batch_size) {
    summary << "; micro-batch " << out.micro_batch_size << " x " << out.grad_accumulation
            << " accumulation steps instead of " << config.train.micro_batch_size << " x "
            << config.train.grad_accumulation << ", the same global batch";
  }
  summary << ")";
  out.summary = summary.str();
  return out;
}

}  // namespace ferry::offload
