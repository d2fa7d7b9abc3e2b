// SFT training throughput on the CPU: full optimizer steps (forward, loss, backward, global-norm
// clipping, AdamW through the parameter engine's `none` policy) on one fixed batch, in real
// tokens per second. scripts/bench-sft.sh runs it beside a plain transformers + torch.optim.AdamW
// loop on the same weights, batch and thread count and prints the ratio, and with the LM head's
// logits chunked or not (train.logits_chunk). Also prints what one step holds on the (emulated)
// device, activations included (the activation meter), next to the memory model's estimate;
// scripts/bench-memory.sh compares those for large vocabularies. With --activation-offload 1 the
// checkpointed layers' inputs wait in host memory (train.activation_offload; needs checkpointing).
//
//   sft_bench --model DIR --batch batch.safetensors [--steps 10] [--threads 2] [--checkpointing 0|1]
//             [--logits-chunk N]   (N as train.logits_chunk: -1 auto, 0 all logits at once; default 0)
//             [--activation-offload 0|1] [--policy none|optimizer|params] (offload.policy; default none)
//             [--optimizer 0|1]  (0: forward and backward only, no clipping or AdamW; scripts/bench-moe.sh)
// A Mixture-of-Experts model adds its load-balancing loss as the trainer does (output_router_logits).
// batch.safetensors holds input_ids, attention_mask, position_ids and labels (B, T).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "offload/engine.h"
#include "offload/memory_model.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "stages/sft.h"
#include "train/backbone_runner.h"

namespace {

struct BenchArgs {
  std::string model, batch;
  int64_t steps = 10, threads = 2, checkpointing = 0, logits_chunk = 0, activation_offload = 0, optimizer = 1;
  ferry::OffloadPolicy policy = ferry::OffloadPolicy::none;
};

BenchArgs parse(int argc, char** argv) {
  BenchArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw ferry::UserError("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--model") args.model = value;
    else if (flag == "--batch") args.batch = value;
    else if (flag == "--steps") args.steps = std::stoll(value);
    else if (flag == "--threads") args.threads = std::stoll(value);
    else if (flag == "--checkpointing") args.checkpointing = std::stoll(value);
    else if (flag == "--logits-chunk") args.logits_chunk = std::stoll(value);
    else if (flag == "--activation-offload") args.activation_offload = std::stoll(value);
    else if (flag == "--optimizer") args.optimizer = std::stoll(value);
    else if (flag == "--policy") {
      if (!ferry::enum_parse(value, args.policy) || args.policy == ferry::OffloadPolicy::auto_) {
        throw ferry::UserError("--policy must be none, optimizer or params, got " + value);
      }
    }
    else throw ferry::UserError("unknown flag " + flag);
  }
  if (args.model.empty() || args.batch.empty()) throw ferry::UserError("--model and --batch are required");
  if (args.activation_offload != 0 && args.checkpointing == 0) {
    throw ferry::UserError("--activation-offload 1 offloads the checkpointed layers' inputs: add --checkpointing 1");
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    using namespace ferry;
    const BenchArgs args = parse(argc, argv);
    torch::set_num_threads(static_cast<int>(args.threads));
    CausalLM model = causal_lm_from_pretrained(args.model);
    model->train();
    const io::TensorMap tensors = io::load_safetensors(args.batch);
    MicroBatch batch;
    for (const char* name : {"input_ids", "attention_mask", "position_ids", "labels"}) batch.tensors[name] = tensors.at(name);
    batch.loss_weight = shifted_label_count(tensors.at("labels"));
    batch.tokens = tensors.at("attention_mask").sum().item<int64_t>();
    offload::EngineOptions options;
    options.weight_decay = 0.01;
    options.cpu_threads = args.threads;
    options.activation_offload = args.activation_offload != 0;
    options.policy = args.policy;
    auto engine = offload::make_parameter_engine(options);
    engine->add_model("policy", offload::group_parameters(*model, false), true);
    BackboneRunner runner(*engine, args.checkpointing != 0, args.logits_chunk);
    const std::unique_ptr<offload::ActivationMeter> meter = engine->meter_activations();
    SftObjective objective("policy", *model);
    auto one_step = [&] {
      engine->zero_grad();
      const LossSum loss = objective.loss(batch, runner);
      runner.add_router_loss(loss.sum / static_cast<double>(batch.loss_weight)).backward();
      if (args.optimizer == 0) return;
      const double norm = engine->gradient_norm();
      engine->step(1e-4, std::min(1.0, 1.0 / (norm + 1e-6)));
    };
    engine->reset_memory_peaks();
    one_step();  // warm-up, and the step whose memory is reported
    const offload::MemoryAccountant& memory = engine->accountant();
    const uint64_t device_peak = memory.peak(offload::MemoryTier::device);
    const uint64_t activation_peak = memory.peak(offload::MemoryTier::device, offload::MemoryCategory::activations);
    const uint64_t host_activation_peak = memory.peak(offload::MemoryTier::host, offload::MemoryCategory::activations);
    offload::TrainingShape shape;
    shape.model = model->config();
    shape.precision = Precision::fp32;
    shape.seq_len = tensors.at("input_ids").size(1);
    shape.logits_chunk = args.logits_chunk;
    const std::vector<bool> checkpointed(static_cast<size_t>(shape.model.num_hidden_layers), args.checkpointing != 0);
    const uint64_t estimate = offload::MemoryModel(shape).activation_bytes(tensors.at("input_ids").size(0), checkpointed,
                                                                           args.activation_offload != 0);
    std::vector<double> times;
    for (int64_t i = 0; i < args.steps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      one_step();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const double tokens_per_s = static_cast<double>(batch.tokens) / median;
    std::cout << "ferry: batch " << tensors.at("input_ids").size(0) << " x " << tensors.at("input_ids").size(1)
              << ", threads " << args.threads << ", policy " << ferry::enum_name(args.policy)
              << (args.checkpointing ? ", activation checkpointing" : "")
              << (args.activation_offload ? " with the inputs offloaded" : "")
              << ", logits_chunk " << args.logits_chunk << ": median step " << median << " s, " << tokens_per_s
              << " tokens/s; one step's device peak " << device_peak << " bytes, activations " << activation_peak
              << " bytes (memory model: " << estimate << "), offloaded to the host " << host_activation_peak << " bytes\n"
              << "ferry_tokens_per_s=" << tokens_per_s << "\n"
              << "device_peak_bytes=" << device_peak << "\n"
              << "activation_peak_bytes=" << activation_peak << "\n"
              << "estimated_activation_bytes=" << estimate << "\n"
              << "host_activation_peak_bytes=" << host_activation_peak << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
