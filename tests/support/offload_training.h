// The small training runs the offload tests compare: a Llama of the demo model's shape (smaller),
// random learnable token batches, a next-token loss, and `train(spec)`, which runs the shared loop
// (train/trainer.h) under one offload policy and returns its losses, final weights and the
// accountant's peaks. Used by tests/unit/train_offload_policies_test.cpp (CPU-emulated device)
// and tests/gpu/train_offload_cuda_test.cpp (CUDA against the CPU).
#pragma once

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "offload/chunked_engine.h"
#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/model_heads.h"
#include "src/model/model_state.h"
#include "tests/support/max_difference.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_llama_config.h"
#include "train/backbone_runner.h"
#include "train/trainer.h"

namespace ferry::offload_test {

namespace fs = std::filesystem;

// The demo model's shape (configs/demo-model.json) with a smaller vocabulary and 3 layers, so 20
// steps under every policy stay fast.
inline ModelShape small_shape(bool tied = false) {
  ModelShape c = test_support::tiny_llama_config(
      {.vocab_size = 512, .intermediate_size = 176, .num_hidden_layers = 3, .max_position_embeddings = 64});
  c.tie_word_embeddings = tied;
  return c;
}

inline ModelShape demo_shape() {
  ModelShape c = small_shape();
  c.vocab_size = 2000;
  c.hidden_size = 128;
  c.intermediate_size = 352;
  c.num_hidden_layers = 4;
  c.num_key_value_heads = 4;
  c.head_dim = 32;
  return c;
}

// Random token sequences with right padding, the same for every run with the same seed.
class RandomTokens : public BatchSource {
 public:
  RandomTokens(int64_t vocab, int64_t batch, int64_t length, uint64_t seed)
      : vocab_(vocab), batch_(batch), length_(length), seed_(seed) {}
  int64_t batches_per_epoch() const override { return 1000; }
  MicroBatch next_train_batch() override { return make(seed_ + static_cast<uint64_t>(next_++)); }
  DataCursor cursor() const override { return {0, next_}; }
  void restore(const DataCursor& cursor) override { next_ = cursor.position; }
  std::vector<MicroBatch> eval_batches() const override { return {make(seed_ + 100000)}; }

 private:
  MicroBatch make(uint64_t seed) const {
    // Learnable sequences: each row counts up by a row-specific stride from a random start.
    torch::Generator generator = at::detail::createCPUGenerator(seed);
    const torch::Tensor start = torch::randint(0, vocab_ - 4, {batch_, 1}, generator);
    const torch::Tensor stride = torch::randint(1, 4, {batch_, 1}, generator);
    const torch::Tensor ids = (start + stride * torch::arange(length_).unsqueeze(0)).remainder(vocab_ - 4) + 4;
    torch::Tensor mask = torch::ones({batch_, length_}, torch::kLong);
    mask.index_put_({0, torch::indexing::Slice(length_ - 5, torch::indexing::None)}, 0);  // one padded row
    MicroBatch out;
    out.tensors["input_ids"] = ids;
    out.tensors["attention_mask"] = mask;
    out.tensors["position_ids"] = torch::arange(length_).expand({batch_, length_}).contiguous();
    out.tensors["labels"] = ids.masked_fill(mask.eq(0), -100);
    out.loss_weight = out.tensors["labels"].narrow(1, 1, length_ - 1).ne(-100).sum().item<int64_t>();
    out.tokens = mask.sum().item<int64_t>();
    return out;
  }
  int64_t vocab_, batch_, length_;
  uint64_t seed_;
  int64_t next_ = 0;
};

// The next-token loss on full logits, as a user's objective would write it; or (head_op) through
// the runner's LM-head op, chunked by train.logits_chunk.
class NextTokenLoss : public TrainingObjective {
 public:
  explicit NextTokenLoss(CausalLMImpl& model, bool head_op = false) : model_(model), head_op_(head_op) {}
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override {
    if (head_op_) {
      const torch::Tensor& labels = batch.at("labels");
      const kernels::LmHeadTokens t =
          runner.token_logprobs("policy", model_, batch.at("input_ids"), batch.at("attention_mask"),
                                batch.at("position_ids"), labels.narrow(1, 1, labels.size(1) - 1), 0, 1.0, false);
      return {-t.logprobs.sum(), {}};
    }
    const torch::Tensor logits =
        runner.causal_lm("policy", model_, batch.at("input_ids"), batch.at("attention_mask"), batch.at("position_ids"));
    const int64_t t = logits.size(1);
    const torch::Tensor predicted = logits.narrow(1, 0, t - 1).to(torch::kFloat);
    const torch::Tensor targets = batch.at("labels").narrow(1, 1, t - 1).to(logits.device());
    return {torch::nn::functional::cross_entropy(
                predicted.reshape({-1, predicted.size(-1)}), targets.reshape({-1}),
                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(-100)),
            {}};
  }

 private:
  CausalLMImpl& model_;
  bool head_op_;
};

inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir = ferry::test_support::process_scratch_dir("ferry_offload_policies") / name;
  std::error_code ec;
  fs::remove_all(dir, ec);
  return dir;
}

struct RunSpec {
  OffloadPolicy policy = OffloadPolicy::none;
  Precision precision = Precision::fp32;
  ModelShape shape = small_shape();
  uint64_t chunk_size = 0;
  int64_t prefetch = 1;
  int64_t steps = 20;
  int64_t micro_batch_size = 3;
  int64_t grad_accumulation = 2;
  bool checkpointing = false;
  uint64_t budget = 0;
  std::vector<std::string> kept_groups;
  std::string output;           // reuse this output folder (resume tests); empty: a fresh one
  bool resume = false;          // train.resume auto
  int64_t crash_after = 0;      // throw after this step (0: never)
  c10::Device device = c10::kCPU;  // where the model computes (it is built on the CPU)
  double max_grad_norm = 1.0;
  bool overlap_step = false;    // offload.overlap_step (needs max_grad_norm 0)
  int64_t length = 24;          // tokens per sequence
  bool head_op = false;         // the loss through BackboneRunner::token_logprobs
  int64_t logits_chunk = 0;     // train.logits_chunk for it
  OptimizerState optimizer_state = OptimizerState::fp32;  // offload.optimizer_state
  MasterWeights master_weights = MasterWeights::fp32;     // offload.master_weights
  bool activation_offload = false;  // train.activation_offload
  int64_t seed = 42;                // train.seed (bf16_stochastic's rounding seed)
  bool nvme = false;                // offload.optimizer_state_tier nvme, nvme_dir a fresh scratch folder
  bool params_on_nvme = false;      // offload.params_tier nvme (the same folder)
  int64_t nvme_window = 2048;       // parameters per NVMe record (small: several windows per tensor)
  uint64_t host_budget = 0;         // offload.host_memory (0: unlimited here)
  // Called with true right before the trainer runs (model and engine set up) and with false right
  // after (before the results are copied out): memory measurements of the training alone.
  std::function<void(bool)> around_run;
};

struct Crash : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunResult {
  std::vector<double> losses;
  io::TensorMap weights;
  offload::MemorySnapshot memory;
  int64_t chunks_finished_during_backward = 0;  // ChunkedEngine only
};

inline RunResult train(const RunSpec& spec, const std::string& name) {
  torch::set_num_threads(1);
  Config config;
  config.output.dir = spec.output.empty() ? fresh_dir(name).string() : spec.output;
  config.output.keep_last = 1;
  config.train.save_every = 1;
  if (spec.resume) config.train.resume = "auto";
  config.logging.progress = ProgressMode::never;
  config.logging.tensorboard = false;
  config.train.precision = spec.precision;
  config.train.learning_rate = 3e-3;
  config.train.warmup_steps = 3;
  config.train.weight_decay = 0.01;
  config.train.micro_batch_size = spec.micro_batch_size;
  config.train.grad_accumulation = spec.grad_accumulation;
  config.train.max_grad_norm = spec.max_grad_norm;
  config.train.max_steps = spec.steps;
  config.train.gradient_checkpointing = spec.checkpointing;
  config.offload.policy = spec.policy;
  config.offload.chunk_size.bytes = spec.chunk_size;
  config.offload.prefetch = spec.prefetch;
  config.offload.gpu_memory.bytes = spec.budget;
  config.offload.overlap_step = spec.overlap_step;
  config.train.logits_chunk = spec.logits_chunk;
  config.offload.optimizer_state = spec.optimizer_state;
  config.offload.master_weights = spec.master_weights;
  config.train.activation_offload = spec.activation_offload;
  config.train.seed = spec.seed;
  fs::path nvme_dir;
  if (spec.nvme || spec.params_on_nvme) {
    nvme_dir = fs::path(config.output.dir + "-nvme");
    fs::create_directories(nvme_dir);
    if (spec.nvme) config.offload.optimizer_state_tier = StateTier::nvme;
    if (spec.params_on_nvme) config.offload.params_tier = StateTier::nvme;
    config.offload.nvme_dir = nvme_dir.string();
  }

  CausalLM model(spec.shape);
  init_model_weights(*model, spec.shape, 0.02, 5);
  if (spec.precision == Precision::bf16) model->to(torch::kBFloat16);
  model->train();
  offload::EngineOptions options = offload::EngineOptions::from_config(config);
  options.kept_groups = spec.kept_groups;
  options.nvme_window = spec.nvme_window;
  options.host_budget = spec.host_budget;
  options.device = spec.device;
  auto engine = offload::make_parameter_engine(options);
  engine->add_model("policy", offload::group_parameters(*model, false), true);
  model->to(spec.device);
  RandomTokens data(spec.shape.vocab_size, spec.micro_batch_size, spec.length, 17);
  NextTokenLoss objective(*model, spec.head_op);
  TrainedModel trained;
  trained.name = "policy";
  trained.save = [&](const fs::path& folder) { io::save_safetensors(folder / "model.safetensors", state_of(*model)); };
  trained.load = [&](const fs::path& folder) { load_state(*model, io::load_safetensors(folder / "model.safetensors")); };
  std::ostringstream console;
  MetricsLoggerOptions quiet;
  quiet.console = &console;
  quiet.console_is_terminal = false;
  Trainer trainer(config, *engine, data, objective, trained, &console, quiet);
  RunResult result;
  trainer.on_step = [&](int64_t step, double loss) {
    result.losses.push_back(loss);
    if (step == spec.crash_after) throw Crash("stopped");
  };
  if (spec.around_run) spec.around_run(true);
  trainer.run();
  if (spec.around_run) spec.around_run(false);
  engine->with_weights("policy", offload::ParameterEngine::WeightAccess::read, [&] {
    for (const auto& [key, t] : state_of(*model)) result.weights[key] = t.to(torch::kCPU, torch::kFloat).clone();
  });
  result.memory = engine->accountant().snapshot();
  if (const auto* chunked = dynamic_cast<const offload::ChunkedEngine*>(engine.get())) {
    result.chunks_finished_during_backward = chunked->chunks_finished_during_backward();
  }
  std::error_code ec;
  if (spec.output.empty()) fs::remove_all(config.output.dir, ec);
  if (!nvme_dir.empty()) {
    EXPECT_TRUE(fs::is_empty(nvme_dir, ec)) << "the NVMe working file is visible: it is unlinked at creation";
    fs::remove_all(nvme_dir, ec);
  }
  return result;
}

// Runs `spec` into a fresh folder and stops it after step `crash_after` (after that step's loss,
// before its checkpoint), then runs `resumed` there with train.resume auto: the resumed run.
inline RunResult crash_and_resume(RunSpec spec, int64_t crash_after, RunSpec resumed, const std::string& name) {
  const fs::path dir = fresh_dir(name);
  spec.output = dir.string();
  spec.crash_after = crash_after;
  EXPECT_THROW(train(spec, ""), Crash);
  resumed.output = dir.string();
  resumed.resume = true;
  RunResult result = train(resumed, "");
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

// Largest relative loss difference (b is the reference); NaN, failing every comparison, when a
// loss is not finite or the runs took different numbers of steps (tests/support/max_difference.h).
inline double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  return test_support::max_relative_difference(a, b);
}

// Largest weight difference; NaN when a weight is not finite or the names differ.
inline double worst_weight_difference(const io::TensorMap& a, const io::TensorMap& b) {
  return test_support::max_abs_difference(a, b);
}

// The run trained like the reference: every loss within `tolerance` relative, every weight
// within `tolerance` absolute.
inline void expect_trains_like(const RunResult& run, const RunResult& reference, double tolerance,
                               const std::string& what = "") {
  EXPECT_LE(worst_relative(run.losses, reference.losses), tolerance) << what;
  EXPECT_LE(worst_weight_difference(run.weights, reference.weights), tolerance) << what;
}

}  // namespace ferry::offload_test
