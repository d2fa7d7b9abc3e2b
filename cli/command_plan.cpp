// `ferry plan --config F [--gpu-memory 8GiB]`: the offload engine's memory plan for a run — the
// model, the chosen placement (policy, kept/paged blocks, checkpointing, micro-batch), bytes per
// tier by category, the estimated step time and the rates assumed. Exit 2 with the explanation
// (smallest footprint, what would make it fit) when the budget cannot work. The arithmetic is
// offload/planner.h; this file resolves inputs and prints.
#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#ifdef FERRY_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/config_args.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "offload/auto_policy.h"
#include "offload/planner.h"
#include "offload/rate_probe.h"
#include "src/io/hf_config.h"
#include "src/io/model_path.h"
#include "src/model/family/model_tensors.h"

namespace ferry::cli {
namespace {

// With no budget configured and no GPU whose size we can read, plan for a common laptop GPU.
constexpr uint64_t kDefaultBudgetWithoutGpu = 8ull << 30;

struct PlanArgs {
  ConfigArgs config;
  std::string gpu_memory;
  std::string device_overhead;
  double device_tflops = 0;
  double cpu_adam_rate = 0;  // G params/s
  bool measure = false;      // --measure: this machine's rates instead of defaults
  int64_t nproc = 0;         // --nproc: plan one of N data-parallel processes (0: WORLD_SIZE or 1)
};

std::filesystem::path model_config_path(const Config& config) {
  if (!config.model.path.empty()) return io::resolve_model_path(config.model.path) / "config.json";
  if (!config.model.config.empty()) return config.model.config;
  throw ConfigError("the plan needs the model's shape: set model.path (a Hugging Face folder) or model.config (a config.json)");
}

uint64_t parse_size_flag(const std::string& text, const char* flag) {
  const auto bytes = parse_byte_size(text);
  if (!bytes) throw UserError(std::string(flag) + " '" + text + "' is not a memory size; write e.g. 8GiB or 512MiB");
  return *bytes;
}

struct Budget {
  uint64_t bytes = 0;
  std::string source;
};

Budget resolve_budget(const PlanArgs& args, const Config& config) {
  if (!args.gpu_memory.empty()) {
    const uint64_t bytes = parse_size_flag(args.gpu_memory, "--gpu-memory");
    if (bytes == 0) throw UserError("--gpu-memory must be positive, e.g. 8GiB");
    return {bytes, "--gpu-memory"};
  }
  if (config.offload.gpu_memory.bytes > 0) return {config.offload.gpu_memory.bytes, "offload.gpu_memory"};
  if (torch::cuda::is_available()) {
#ifdef FERRY_WITH_CUDA
    const uint64_t total = at::cuda::getDeviceProperties(0)->totalGlobalMem;
    return {total, "offload.gpu_memory is 0: the whole of GPU 0"};
#else
    return {kDefaultBudgetWithoutGpu, "offload.gpu_memory is 0 and this build cannot read the GPU's size: assumed " +
                                          format_byte_size(kDefaultBudgetWithoutGpu) + "; pass --gpu-memory"};
#endif
  }
  return {kDefaultBudgetWithoutGpu, "offload.gpu_memory is 0 and no GPU is visible: assumed " +
                                        format_byte_size(kDefaultBudgetWithoutGpu) +
                                        "; pass --gpu-memory with your GPU's size"};
}

std::string millions(int64_t n) {
  char buffer[32];
  if (n >= 1'000'000'000) std::snprintf(buffer, sizeof(buffer), "%.2f B", n / 1e9);
  else std::snprintf(buffer, sizeof(buffer), "%.2f M", n / 1e6);
  return buffer;
}

std::string seconds(double s) {
  char buffer[32];
  if (s < 1e-3) std::snprintf(buffer, sizeof(buffer), "%.1f us", s * 1e6);
  else if (s < 1) std::snprintf(buffer, sizeof(buffer), "%.1f ms", s * 1e3);
  else std::snprintf(buffer, sizeof(buffer), "%.2f s", s);
  return buffer;
}

std::string padded(std::string text, size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

void print_memory_table(std::ostream& out, const offload::MemoryEstimate& memory, uint64_t budget,
                        uint64_t host_budget) {
  using offload::MemoryCategory;
  using offload::MemoryTier;
  const uint64_t nvme = memory.bytes.tier_total(MemoryTier::nvme);  // offload.optimizer_state_tier nvme
  out << "memory (bytes per tier):\n"
      << "                    device          host" << (nvme > 0 ? "          nvme" : "") << "\n";
  for (MemoryCategory category : offload::kAllMemoryCategories) {
    std::string name(offload::memory_category_name(category));
    name.resize(14, ' ');
    out << "  " << name << padded(format_bytes_approx(memory.bytes.at(MemoryTier::device, category)), 10)
        << padded(format_bytes_approx(memory.bytes.at(MemoryTier::host, category)), 14);
    if (nvme > 0) out << padded(format_bytes_approx(memory.bytes.at(MemoryTier::nvme, category)), 14);
    out << "\n";
  }
  out << "  total         " << padded(format_bytes_approx(memory.device_total()), 10)
      << padded(format_bytes_approx(memory.host_total()), 14);
  if (nvme > 0) out << padded(format_bytes_approx(nvme), 14);
  out << "   (device budget " << format_bytes_approx(budget) << ", host budget "
      << (host_budget > 0 ? format_bytes_approx(host_budget) : std::string("unlimited")) << ")\n";
}

// train-distill's frozen teacher shares the device with the student: under none and optimizer its
// weights stay there whole; under params and auto a group of it is paged in at a time (two with
// the prefetch). What it holds comes off the device budget the student is planned within.
void reserve_teacher(const Config& config, offload::PlannerRequest& request, std::ostream& out) {
  const std::string& folder = config.distill.teacher_model;
  if (folder.empty()) return;
  const std::filesystem::path json = io::resolve_model_path(folder) / "config.json";
  if (!std::filesystem::exists(json)) {
    out << "teacher: " << folder << ": no config.json to size it by; the plan below counts the student alone\n";
    return;
  }
  const ModelShape teacher = io::read_hf_config(json);
  const uint64_t bytes = config.train.precision == Precision::fp32 ? 4 : 2;
  const uint64_t weights = static_cast<uint64_t>(parameter_count(teacher)) * bytes;
  const uint64_t table = static_cast<uint64_t>(teacher.vocab_size * teacher.hidden_size) * bytes;
  const uint64_t tables = teacher.tie_word_embeddings ? table : 2 * table;
  const uint64_t layer = (weights - std::min(weights, tables)) / static_cast<uint64_t>(std::max<int64_t>(teacher.num_hidden_layers, 1));
  const OffloadPolicy policy = config.offload.policy;
  const bool whole = policy == OffloadPolicy::none || policy == OffloadPolicy::optimizer;
  const uint64_t held = whole ? weights : std::min(weights, 2 * std::max(table, layer));
  out << "teacher: " << folder << ": " << teacher.num_hidden_layers << " layers, hidden " << teacher.hidden_size
      << ", " << millions(parameter_count(teacher)) << " parameters, " << format_bytes_approx(weights)
      << " of frozen weights (no gradients or optimizer state); "
      << (whole ? "under " + std::string(enum_name(policy)) + " it stays on the device whole"
                : "paged a group at a time (two with the prefetch, up to " + format_bytes_approx(held) + ")")
      << ": the student is planned within the device budget less " << format_bytes_approx(held) << "\n";
  if (held >= request.device_budget) {
    throw UserError("the teacher (" + folder + ") alone holds " + format_bytes_approx(held) + " of the " +
                    format_bytes_approx(request.device_budget) + " device budget under offload.policy " +
                    std::string(enum_name(policy)) + "; use offload.policy params or auto, or a larger budget");
  }
  request.device_budget -= held;
}

void run_plan(const PlanArgs& args) {
  const Config config = resolve_config(args.config);
  const std::filesystem::path config_json = model_config_path(config);
  const ModelShape model = io::read_hf_config(config_json);
  const Budget budget = resolve_budget(args, config);
  if (args.device_tflops < 0 || args.cpu_adam_rate < 0) throw UserError("rates must be positive (0: the default)");

  offload::PlannerRequest request = offload::planner_request(config, model, budget.bytes);
  if (args.nproc < 0) throw UserError("--nproc must be >= 1");
  if (args.nproc > 0) request.shape.processes = args.nproc;
  if (!args.device_overhead.empty()) {
    request.constants.device_overhead_bytes = parse_size_flag(args.device_overhead, "--device-overhead");
  }
  request.rates.device_tflops = args.device_tflops;
  request.rates.cpu_adam_params_per_s = args.cpu_adam_rate * 1e9;
  if (args.measure) {
    const c10::Device device = torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
    const std::string nvme_dir =
        config.offload.optimizer_state_tier == StateTier::nvme || config.offload.params_tier == StateTier::nvme
            ? config.offload.nvme_dir
            : std::string();
    request.rates =
        offload::measure_rates(request.rates, device, config.train.precision, config.offload.cpu_threads, nvme_dir);
  }
  const bool automatic = config.offload.policy == OffloadPolicy::auto_;

  const offload::MemoryModel shape_model(request.shape, request.constants);
  std::ostringstream out;
  out << "model: " << config_json.string() << ": " << model.num_hidden_layers << " layers, hidden "
      << model.hidden_size << ", " << model.num_attention_heads << " heads (" << model.num_key_value_heads
      << " kv), vocab " << model.vocab_size << ", " << millions(shape_model.base_parameters()) << " parameters\n";
  if (model.has_experts()) {  // total and active: a token runs experts_per_token of each sparse layer's experts
    int64_t sparse = 0;
    for (int64_t i = 0; i < model.num_hidden_layers; ++i) sparse += model.layer_has_experts(i) ? 1 : 0;
    out << "experts: " << model.moe.num_experts << " per sparse layer (" << sparse << " of " << model.num_hidden_layers
        << " layers), " << model.moe.experts_per_token << " active per token, " << model.moe.expert_intermediate_size
        << " wide; " << millions(active_parameter_count(model)) << " parameters active per token of "
        << millions(parameter_count(model)) << "\n";
  }
  out << "training: " << enum_name(config.train.precision) << ", "
      << (config.lora.rank > 0 ? "LoRA rank " + std::to_string(config.lora.rank) + " (" +
                                     millions(shape_model.trainable_parameters()) + " trainable)"
                               : std::string("full fine-tuning"))
      << ", " << config.train.micro_batch_size * config.train.grad_accumulation << " sequences x "
      << config.data.max_length << " tokens per step\n";
  if (shape_model.quantized_parameters() > 0) {
    char per_weight[32];
    std::snprintf(per_weight, sizeof(per_weight), "%.3f", static_cast<double>(shape_model.quantized_bytes()) /
                                                              static_cast<double>(shape_model.quantized_parameters()));
    const bool nf4 = config.lora.quantize_base == BaseQuantization::nf4;
    const bool gguf = config.lora.quantize_base == BaseQuantization::gguf;
    out << "base: the decoder projections in " << (nf4 ? "4-bit NF4" : gguf ? "the GGUF's ggml blocks" : "int8")
        << " (lora.quantize_base"
        << (nf4 && config.lora.double_quant ? ", double-quantised scales" : "") << "): "
        << millions(shape_model.quantized_parameters()) << " weights in "
        << format_bytes_approx(shape_model.quantized_bytes()) << " (" << per_weight
        << " byte each); each is dequantised for its matmul into a " << enum_name(config.train.precision)
        << " buffer of up to " << format_bytes_approx(shape_model.dequantize_buffer_bytes())
        << " (counted under buffers); embeddings, norms and head stay " << enum_name(config.train.precision) << "\n";
  }
  if (request.shape.processes > 1) {
    out << "data parallel: " << request.shape.processes << " processes, distributed.zero_stage "
        << config.distributed.zero_stage << "; the figures are one process's"
        << (config.distributed.zero_stage >= 3   ? " (1/N of the master weights, moments and host weights)"
            : config.distributed.zero_stage >= 1 ? " (1/N of the master weights and moments)"
                                                 : " (each holds everything: distributed.zero_stage 1-3 shards it)")
        << "\n";
  }
  out << "device budget: " << format_bytes_approx(budget.bytes) << " (" << budget.source << ")\n";
  out << "host budget: "
      << (request.host_budget > 0 ? format_bytes_approx(request.host_budget) : std::string("unlimited (unknown)")) << " ("
      << (config.offload.host_memory.bytes > 0 ? "offload.host_memory"
                                               : "offload.host_memory is 0: what /proc/meminfo says is available, less 10%")
      << ")\n";
  if (config.stage == Stage::distill) reserve_teacher(config, request, out);
  if (config.stage == Stage::ppo) {
    out << "note: this plans one model of this shape; PPO holds up to four (actor, critic, reference, reward)\n";
  } else if (config.stage == Stage::grpo) {
    out << "note: this plans one model of this shape; GRPO holds the policy, plus a reference when grpo.beta > 0 "
           "and a reward model when `rewards` lists one\n";
  }

  const offload::PlanResult result = offload::plan(request);
  if (!result.best) {
    std::cout << out.str() << std::flush;
    throw UserError(offload::explain_no_fit(request, result));
  }
  const offload::Plan& p = *result.best;
  offload::TrainingShape chosen_shape = request.shape;
  chosen_shape.grad_accumulation = p.grad_accumulation;
  const offload::MemoryModel chosen_model(chosen_shape, request.constants);

  out << "plan: policy " << enum_name(p.choice.policy) << (automatic ? " (chosen by offload.policy auto)" : " (as configured)")
      << ", micro-batch " << p.choice.micro_batch_size << " x " << p.grad_accumulation << " accumulation"
      << ", " << p.describe_checkpointing() << "\n";
  if (p.choice.policy == OffloadPolicy::params && !config.train.gradient_checkpointing) {
    out << "  (under params every layer is recomputed in backward: train.gradient_checkpointing is implied)\n";
  }
  out << "  " << offload::describe_kept_chunks(chosen_model, p.choice) << " ("
      << chosen_model.layout().chunks().size() << " chunks, largest "
      << format_bytes_approx(chosen_model.layout().largest_chunk_bytes()) << ")\n";
  print_memory_table(out, p.memory, budget.bytes, request.host_budget);
  if (p.choice.policy != OffloadPolicy::none) {
    out << "host bytes by optimizer-state format (int8 moments: offload.optimizer_state int8; bf16 + Kahan master "
           "weights: offload.master_weights bf16_kahan; no master copy: bf16_stochastic):\n"
        << offload::describe_state_formats(request, p);
  }
  out << "estimated step: " << seconds(p.time.total_s()) << " (forward " << seconds(p.time.forward_s) << ", backward "
      << seconds(p.time.backward_s) << ", optimizer " << seconds(p.time.optimizer_s) << "; compute alone "
      << seconds(p.time.compute_s) << ")";
  if (config.offload.overlap_step && p.choice.policy != OffloadPolicy::none) {
    out << " [optimizer: what backward does not hide, offload.overlap_step]";
  }
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.0f", p.tokens_per_s());
  out << ", " << rate << " tokens/s\n";
  out << "transfers per step: host->device " << format_bytes_approx(p.time.host_to_device_bytes) << ", device->host "
      << format_bytes_approx(p.time.device_to_host_bytes);
  if (p.time.nvme_bytes > 0) out << ", NVMe read + write " << format_bytes_approx(p.time.nvme_bytes);
  out << "\n";
  if (p.choice.policy != OffloadPolicy::none) {
    out << "bound by: " << p.time.bound << " (busy per step: compute " << seconds(p.time.compute_s) << ", PCIe "
        << seconds(p.time.pcie_s) << ", CPU AdamW " << seconds(p.time.cpu_adam_s);
    if (p.time.nvme_bytes > 0) out << ", NVMe " << seconds(p.time.nvme_s);
    out << ")\n";
  }
  out << "assumptions:\n";
  for (const std::string& line : result.rates.lines) out << "  " << line << "\n";
  out << "  device overhead " << format_bytes_approx(request.constants.device_overhead_bytes)
      << " (CUDA context, workspaces, allocator slack; --device-overhead)\n";
  out << "  " << result.candidates << " candidate plans searched; figures are the planner's estimates "
      << "(docs/offload.md), not measurements\n";
  std::cout << out.str();
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* command = app.add_subcommand("plan", "Explain where parameters, gradients and optimizer state will live");
  add_config_options(command, args->config);
  command->add_option("--gpu-memory", args->gpu_memory, "device memory budget, e.g. 8GiB (overrides offload.gpu_memory)");
  command->add_option("--device-tflops", args->device_tflops, "sustained device TFLOP/s in the run's precision (0: default)");
  command->add_option("--cpu-adam-rate", args->cpu_adam_rate, "CPU AdamW rate in billions of parameters per second (0: default)");
  command->add_option("--nproc", args->nproc,
                      "plan one of N data-parallel processes (ferry launch --nproc N), whose share of the state "
                      "distributed.zero_stage sets (default: WORLD_SIZE, else 1)");
  command->add_flag("--measure", args->measure,
                    "measure CPU AdamW here (and PCIe and matmul rates when a GPU is visible) instead of defaults");
  command->add_option("--device-overhead", args->device_overhead, "device memory for the CUDA context and workspaces, e.g. 768MiB");
  command->callback([args] { run_plan(*args); });
}

}  // namespace ferry::cli
