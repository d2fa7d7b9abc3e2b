// The planner's step-time estimate (formulas in planner_cost.h and docs/offload.md).
#include "offload/planner_cost.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "src/model/family/model_tensors.h"

namespace ferry::offload {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string format_rate(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

}  // namespace

ResolvedRates resolve_rates(const PlannerRates& rates, Precision precision, bool nvme) {
  ResolvedRates r;
  const double default_tflops = precision == Precision::fp32 ? kDefaultFp32Tflops : kDefaultHalfTflops;
  const double pcie = rates.pcie_gbps > 0 ? rates.pcie_gbps : kDefaultPcieGbps;
  const double tflops = rates.device_tflops > 0 ? rates.device_tflops : default_tflops;
  r.pcie_bytes_per_s = pcie * 1e9;
  r.device_flops = tflops * 1e12;
  r.cpu_adam_params_per_s = rates.cpu_adam_params_per_s > 0 ? rates.cpu_adam_params_per_s : kDefaultCpuAdamParamsPerS;
  r.gpu_adam_params_per_s = rates.gpu_adam_params_per_s > 0 ? rates.gpu_adam_params_per_s : kDefaultGpuAdamParamsPerS;
  const auto source = [](double rate, const std::string& named, const char* flag, const char* unset) {
    return std::string(" (") + (rate <= 0 ? unset : named.empty() ? flag : named.c_str()) + ")";
  };
  r.lines.push_back(format_rate("PCIe %.1f GB/s per direction", pcie) +
                    source(rates.pcie_gbps, rates.pcie_source, "offload.pcie_bandwidth_gbps",
                           "default, not measured: set offload.pcie_bandwidth_gbps or pass --measure on a GPU"));
  r.lines.push_back(format_rate("device %.1f TFLOP/s sustained", tflops) +
                    source(rates.device_tflops, rates.device_source, "--device-tflops",
                           "default, not measured: pass --device-tflops, or --measure on a GPU"));
  r.lines.push_back(format_rate("CPU AdamW %.2f G params/s", r.cpu_adam_params_per_s / 1e9) +
                    source(rates.cpu_adam_params_per_s, rates.cpu_adam_source, "--cpu-adam-rate",
                           "default, not measured: pass --cpu-adam-rate or --measure"));
  r.lines.push_back(format_rate("GPU AdamW %.1f G params/s", r.gpu_adam_params_per_s / 1e9) +
                    (rates.gpu_adam_params_per_s > 0 ? "" : " (default, not measured)"));
  const bool nvme_measured = rates.nvme_read_gbps > 0 && rates.nvme_write_gbps > 0;
  const double read = nvme_measured ? rates.nvme_read_gbps : kDefaultNvmeReadGbps;
  const double write = nvme_measured ? rates.nvme_write_gbps : kDefaultNvmeWriteGbps;
  r.nvme_read_bytes_per_s = read * 1e9;
  r.nvme_write_bytes_per_s = write * 1e9;
  if (nvme) {
    r.lines.push_back(format_rate("NVMe read %.2f GB/s", read) + format_rate(", write %.2f GB/s", write) +
                      (nvme_measured ? " (" + rates.nvme_source + ")"
                                     : std::string(" (default, not measured: pass --measure to time offload.nvme_dir)")));
  }
  return r;
}

std::vector<double> chunk_forward_flops_per_token(const MemoryModel& model) {
  const ChunkLayout& layout = model.layout();
  const ModelShape& m = model.shape().model;
  const double attention = 2.0 * model.shape().seq_len * m.num_attention_heads * m.head_dim;  // causal: half of 4·T·q
  std::vector<double> flops(layout.chunks().size(), 0.0);
  for (size_t c = 0; c < layout.chunks().size(); ++c) {
    for (size_t t : layout.chunks()[c].tensors) {
      const TensorSpec& spec = layout.tensors()[t];
      if (spec.name == "model.embed_tokens.weight") continue;  // a gather, no FLOPs worth counting
      if (ends_with(spec.name, "norm.weight") || ends_with(spec.name, "layernorm.weight")) {
        if (spec.name == "model.norm.weight" && m.tie_word_embeddings) {
          flops[c] += 2.0 * static_cast<double>(m.vocab_size) * m.hidden_size;  // the tied LM head
        }
        continue;
      }
      // An expert's weights see only the tokens routed to it: experts_per_token / num_experts of them.
      const bool expert = spec.name.find(".experts.") != std::string::npos;
      const double routed = expert ? static_cast<double>(m.moe.experts_per_token) / static_cast<double>(m.moe.num_experts) : 1.0;
      flops[c] += 2.0 * static_cast<double>(spec.weight_count()) * routed;
      if (is_query_projection(spec.name)) {
        flops[c] += attention + 2.0 * static_cast<double>(model.lora_parameters_per_layer());
      }
    }
  }
  return flops;
}

StepCostTable build_step_cost_table(const MemoryModel& model) {
  const ChunkLayout& layout = model.layout();
  const ModelShape& m = model.shape().model;
  const bool lora = model.shape().lora_rank > 0;
  const double w = static_cast<double>(model.weight_bytes());
  const double attention = 2.0 * model.shape().seq_len * m.num_attention_heads * m.head_dim;
  const double adapter_fwd = 2.0 * static_cast<double>(model.lora_parameters_per_layer());
  const std::vector<double> forward_flops = chunk_forward_flops_per_token(model);

  StepCostTable table;
  table.seq_len = static_cast<double>(model.shape().seq_len);
  table.num_layers = m.num_hidden_layers;
  table.lora = lora;
  table.tied_embeddings = m.tie_word_embeddings && layout.chunks().size() > 1;
  table.overlap_step = model.shape().overlap_step;
  table.weights_on_nvme = model.shape().weights_on_nvme;
  if (model.shape().state_on_nvme) {
    const uint64_t n = static_cast<uint64_t>(model.trainable_parameters());
    table.nvme_state_bytes = static_cast<double>(model.master_bytes(n) + model.moment_bytes(n));
    if (model.shape().processes > 1 && model.shape().zero_stage >= 1) {
      table.nvme_state_bytes /= static_cast<double>(model.shape().processes);
    }
  }
  table.trainable_parameters = static_cast<double>(model.trainable_parameters());
  // ZeRO: each process runs AdamW on its share only (the broadcast of the new weights is not costed).
  if (model.shape().processes > 1 && model.shape().zero_stage >= 1) {
    table.trainable_parameters /= static_cast<double>(model.shape().processes);
  }
  const double q = static_cast<double>(m.num_attention_heads * m.head_dim);
  const double kv = static_cast<double>(m.num_key_value_heads * m.head_dim);
  const double h = static_cast<double>(m.hidden_size);
  // A sparse layer's MLP: each token runs experts_per_token experts (and the shared one) and the router.
  const double mlp_width =
      m.has_experts() ? static_cast<double>(m.moe.experts_per_token * m.moe.expert_intermediate_size +
                                            m.moe.shared_expert_intermediate_size) +
                            static_cast<double>(m.moe.num_experts) / 3.0
                      : static_cast<double>(m.intermediate_size);
  table.layer_forward_flops = 2.0 * (h * (q + 2 * kv) + q * h + 3.0 * h * mlp_width) + attention + adapter_fwd;
  table.layer_input_bytes = static_cast<double>(model.checkpointed_layer_bytes_per_token());
  for (size_t c = 0; c < layout.chunks().size(); ++c) {
    ChunkCost cost;
    cost.bytes = static_cast<double>(layout.chunks()[c].bytes);
    cost.grad_bytes = cost.trainable_bytes = static_cast<double>(model.chunk_trainable_parameters(c)) * w;
    cost.forward_flops = forward_flops[c];
    for (size_t t : layout.chunks()[c].tensors) {
      if (is_query_projection(layout.tensors()[t].name)) cost.layers.push_back(layout.tensors()[t].group - 1);
    }
    const double layers_here = static_cast<double>(cost.layers.size());
    const double matmul = forward_flops[c] - layers_here * (attention + adapter_fwd);
    // Backward: weight and input gradients (2x forward) for trainable matmuls, input gradients
    // only (1x) for frozen ones; attention's and the adapters' backward is twice their forward.
    cost.backward_flops = (lora ? 1.0 : 2.0) * matmul + 2.0 * layers_here * (attention + adapter_fwd);
    table.chunks.push_back(std::move(cost));
  }
  return table;
}

StepTimeEstimate estimate_step_time(const MemoryModel& model, const PlacementChoice& choice,
                                    int64_t grad_accumulation, const ResolvedRates& rates) {
  return estimate_step_time(build_step_cost_table(model), choice, grad_accumulation, rates);
}

StepTimeEstimate estimate_step_time(const StepCostTable& table, const PlacementChoice& choice,
                                    int64_t grad_accumulation, const ResolvedRates& rates) {
  FERRY_CHECK(grad_accumulation > 0 && choice.micro_batch_size > 0, "accumulation ", grad_accumulation,
              ", micro-batch ", choice.micro_batch_size);
  FERRY_CHECK(choice.chunk_on_device.empty() || choice.chunk_on_device.size() == table.chunks.size(),
              "chunk_on_device has ", choice.chunk_on_device.size(), " entries for ", table.chunks.size(), " chunks");
  const double tokens = static_cast<double>(choice.micro_batch_size) * table.seq_len;
  const double accumulation = static_cast<double>(grad_accumulation);
  const bool params = choice.policy == OffloadPolicy::params;
  const bool optimizer = choice.policy == OffloadPolicy::optimizer;
  auto paged = [&](size_t c) { return params && (choice.chunk_on_device.empty() || !choice.chunk_on_device[c]); };
  auto checkpointed = [&](int64_t layer) {
    return !choice.layer_checkpointed.empty() && choice.layer_checkpointed[static_cast<size_t>(layer)];
  };
  const double bw = rates.pcie_bytes_per_s;
  const double flops = rates.device_flops;

  StepTimeEstimate e;
  double first_paged_bytes = 0;
  int64_t offloaded_layers = 0;
  for (size_t c = 0; c < table.chunks.size(); ++c) {
    const ChunkCost& chunk = table.chunks[c];
    double recompute = 0;
    double activation_bytes = 0;  // offloaded layer inputs: to the host in forward, back in backward
    for (int64_t layer : chunk.layers) {
      if (!checkpointed(layer)) continue;
      recompute += table.layer_forward_flops;
      if (choice.activation_offload) {
        activation_bytes += table.layer_input_bytes * tokens;
        ++offloaded_layers;
      }
    }
    const double fwd = chunk.forward_flops * tokens / flops;
    const double bwd = (chunk.backward_flops + recompute) * tokens / flops;
    e.compute_s += accumulation * (fwd + bwd);
    double h2d_bytes = paged(c) ? chunk.bytes : 0.0;
    const bool last = c + 1 == table.chunks.size();
    if (last && table.tied_embeddings && paged(0)) h2d_bytes += table.chunks[0].bytes;  // the tied LM head
    // Weights on the NVMe tier: a page-in reads the drive first (the mapping pages it in).
    const double h2d = h2d_bytes / (table.weights_on_nvme ? std::min(bw, rates.nvme_read_bytes_per_s) : bw);
    if (table.weights_on_nvme) {
      e.nvme_s += accumulation * 2 * h2d_bytes / rates.nvme_read_bytes_per_s;
      e.nvme_bytes += static_cast<uint64_t>(accumulation * 2 * h2d_bytes);
    }
    const double activations = activation_bytes / bw;
    if (paged(c) && first_paged_bytes == 0) first_paged_bytes = chunk.bytes;
    // Both offloading policies stream every micro-batch's gradients to the host during backward.
    const double d2h = (params || optimizer) ? chunk.grad_bytes / bw : 0.0;
    e.forward_s += accumulation * std::max({fwd, h2d, activations});
    e.backward_s += accumulation * std::max({bwd, h2d + activations, d2h});
    e.host_to_device_bytes += static_cast<uint64_t>(accumulation * (2 * h2d_bytes + activation_bytes));
    e.device_to_host_bytes += static_cast<uint64_t>(accumulation * ((params || optimizer ? chunk.grad_bytes : 0.0) + activation_bytes));
  }
  // The first paged chunk of each forward pass cannot hide behind earlier compute.
  e.forward_s += accumulation * first_paged_bytes / bw;
  // Per-micro-batch fixed costs, split evenly between the passes.
  const double fixed = accumulation * (static_cast<double>(table.num_layers) * kMicroBatchLayerOverheadS +
                                       static_cast<double>(offloaded_layers) * kActivationOffloadLayerOverheadS);
  e.forward_s += fixed / 2;
  e.backward_s += fixed / 2;

  if (choice.policy == OffloadPolicy::none) {
    e.optimizer_s = table.trainable_parameters / rates.gpu_adam_params_per_s;
  } else {
    // The CPU step runs chunk by chunk and each chunk's new weights are uploaded while the next
    // is updated; the weights that live on the device (all under optimizer, the kept chunks and
    // LoRA adapters under params) must be back before the next forward.
    double upload = 0;
    double largest = 0;
    for (size_t c = 0; c < table.chunks.size(); ++c) {
      if (table.lora || !paged(c)) {
        upload += table.chunks[c].trainable_bytes;
        largest = std::max(largest, table.chunks[c].trainable_bytes);
      }
    }
    double adam = table.trainable_parameters / rates.cpu_adam_params_per_s;
    if (table.overlap_step) {
      // Chunks are updated as backward completes them, all but the first (the embedding's, which
      // backward reaches last) during the last micro-batch's backward.
      double trainable = 0;
      for (const ChunkCost& chunk : table.chunks) trainable += chunk.trainable_bytes;
      const double first = trainable > 0 ? adam * table.chunks.front().trainable_bytes / trainable : 0.0;
      adam -= std::min(adam - first, e.backward_s / accumulation);
    }
    e.cpu_adam_s = table.trainable_parameters / rates.cpu_adam_params_per_s;
    // The state (and the weights) on the NVMe tier are read and written back once per step; each
    // window's IO overlaps the AdamW of the one before.
    double trainable_weight_bytes = 0;
    for (const ChunkCost& chunk : table.chunks) trainable_weight_bytes += chunk.trainable_bytes;
    const double step_bytes = table.nvme_state_bytes + (table.weights_on_nvme ? trainable_weight_bytes : 0.0);
    if (step_bytes > 0) {
      const double io = step_bytes / rates.nvme_read_bytes_per_s + step_bytes / rates.nvme_write_bytes_per_s;
      e.nvme_s += io;
      e.nvme_bytes += static_cast<uint64_t>(2 * step_bytes);
      adam = std::max(adam, io);
    }
    e.optimizer_s = std::max(adam, upload / bw) + largest / bw;
    e.host_to_device_bytes += static_cast<uint64_t>(upload);
  }
  e.pcie_s = static_cast<double>(std::max(e.host_to_device_bytes, e.device_to_host_bytes)) / bw;
  const std::pair<double, const char*> resources[] = {
      {e.compute_s, "compute"}, {e.pcie_s, "PCIe"}, {e.cpu_adam_s, "CPU AdamW"}, {e.nvme_s, "NVMe"}};
  e.bound = std::max_element(std::begin(resources), std::end(resources))->second;
  return e;
}

}  // namespace ferry::offload
