// SFT training throughput on the CPU: full optimizer steps (forward, loss, backward, global-norm
// clipping, AdamW through the parameter engine's `none` policy) on one fixed batch, in real
// tokens per second. scripts/bench-sft.sh runs it beside a plain transformers + torch.optim.AdamW
// loop on the same weights, batch and thread count and prints the ratio.
//
//   sft_bench --model DIR --batch batch.safetensors [--steps 10] [--threads 2] [--checkpointing 0|1]
// batch.safetensors holds input_ids, attention_mask, position_ids and labels (B, T).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "offload/engine.h"
#include "src/core/error.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "src/train/backbone_runner.h"
#include "stages/sft.h"

namespace {

struct BenchArgs {
  std::string model, batch;
  int64_t steps = 10, threads = 2, checkpointing = 0;
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
    else throw ferry::UserError("unknown flag " + flag);
  }
  if (args.model.empty() || args.batch.empty()) throw ferry::UserError("--model and --batch are required");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    using namespace ferry;
    const BenchArgs args = parse(argc, argv);
    torch::set_num_threads(static_cast<int>(args.threads));
    LlamaForCausalLM model = causal_lm_from_pretrained(args.model);
    model->train();
    const io::TensorMap tensors = io::load_safetensors(args.batch);
    MicroBatch batch;
    for (const char* name : {"input_ids", "attention_mask", "position_ids", "labels"}) batch.tensors[name] = tensors.at(name);
    batch.loss_weight = shifted_label_count(tensors.at("labels"));
    batch.tokens = tensors.at("attention_mask").sum().item<int64_t>();
    EngineOptions options;
    options.weight_decay = 0.01;
    options.cpu_threads = args.threads;
    auto engine = make_parameter_engine(options);
    engine->add_model("policy", group_parameters(*model, false), true);
    BackboneRunner runner(*engine, args.checkpointing != 0);
    SftObjective objective("policy", *model);
    auto one_step = [&] {
      engine->zero_grad();
      (objective.loss(batch, runner).sum / static_cast<double>(batch.loss_weight)).backward();
      const double norm = engine->gradient_norm();
      engine->step(1e-4, std::min(1.0, 1.0 / (norm + 1e-6)));
    };
    one_step();  // warm-up
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
              << ", threads " << args.threads << (args.checkpointing ? ", activation checkpointing" : "")
              << ": median step " << median << " s, " << tokens_per_s << " tokens/s\n"
              << "ferry_tokens_per_s=" << tokens_per_s << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
