// train-sft with LoRA through the shared loop, on the tiny model and data of
// stages_sft_train_test.cpp, fp32 CPU, with the stage's own LoRA preparation and save/load
// (prepare_lora, stage_trained_model, export_lora_final): only the adapters train and hold optimizer
// state, the base weights stay bit-identical, adapters sit in their layer's engine group, resume
// after a crash equals a run that never stopped, and final/ is the merged model or the PEFT adapter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <torch/torch.h>

#include <filesystem>
#include <sstream>

#include "core/config/config.h"
#include "offload/engine.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/lora_adapter.h"
#include "src/io/safetensors.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "stages/sft.h"
#include "tests/support/max_difference.h"
#include "tests/support/tiny_llama_config.h"
#include "train/backbone_runner.h"
#include "train/checkpoint_folders.h"
#include "train/trainer.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ferry_sft_lora_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

ModelShape tiny_shape() {
  ModelShape c = test_support::tiny_llama_config(2000);
  c.pad_token_id = 3;
  return c;
}

const std::vector<TokenizedSample>& samples() {
  static const std::vector<TokenizedSample> loaded = [] {
    const std::string root = FERRY_SOURCE_DIR;
    const Tokenizer tokenizer(root + "/data/tokenizer.model");
    return load_sft_dataset(root + "/data/sft_train.jsonl", tokenizer, load_chat_template("demo"), 64, false, 40).samples;
  }();
  return loaded;
}

Config lora_config(const fs::path& dir) {
  Config c;
  c.output.dir = dir.string();
  c.output.keep_last = 0;
  c.logging.progress = ProgressMode::never;
  c.logging.tensorboard = false;
  c.train.seed = 7;
  c.train.learning_rate = 1e-2;
  c.train.warmup_steps = 1;
  c.train.weight_decay = 0.1;  // would move the base weights if they were in the optimizer
  c.train.micro_batch_size = 4;
  c.train.grad_accumulation = 2;
  c.train.max_steps = 6;
  c.train.save_every = 3;
  c.lora.rank = 4;
  c.lora.alpha = 8;
  c.lora.dropout = 0.1;  // its random draws must resume exactly too
  c.lora.target_modules = {"q_proj", "v_proj", "down_proj"};
  return c;
}

struct Crash : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TrainingRun {
  std::vector<double> losses;
  io::TensorMap initial, weights;  // every parameter before / after (copies)
  CausalLM model{nullptr};
  std::unique_ptr<offload::ParameterEngine> engine;
};

TrainingRun train(const Config& config, int64_t crash_at_step = -1) {
  torch::set_num_threads(1);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));  // as run_sft: dropout draws from it
  TrainingRun run;
  const ModelShape shape = tiny_shape();
  run.model = CausalLM(shape);
  init_model_weights(*run.model, shape, 0.02, 11);
  run.model->train();
  prepare_lora(*run.model, config);
  for (const auto& [name, t] : state_of(*run.model)) run.initial[name] = t.clone();
  run.engine = offload::make_parameter_engine(offload::EngineOptions::from_config(config));
  run.engine->add_model("policy", offload::group_parameters(*run.model, false), true);
  SftBatchSource::Options data;
  data.micro_batch_size = config.train.micro_batch_size;
  data.pad_id = 3;
  data.seed = static_cast<uint64_t>(config.train.seed);
  std::vector<TokenizedSample> train_samples(samples().begin(), samples().begin() + 32);
  SftBatchSource source(train_samples, {}, data);
  SftObjective objective("policy", *run.model);
  const Tokenizer tokenizer(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model");
  const TrainedModel trained = stage_trained_model("policy", *run.model, shape, config, tokenizer);
  std::ostringstream console;
  Trainer trainer(config, *run.engine, source, objective, trained, &console);
  trainer.on_step = [&](int64_t step, double loss) {
    run.losses.push_back(loss);
    if (step == crash_at_step) throw Crash("simulated crash");
  };
  const TrainResult result = trainer.run();
  if (!result.final_dir.empty()) export_lora_final(result.final_dir, config);
  for (const auto& [name, t] : state_of(*run.model)) run.weights[name] = t.clone();
  return run;
}

// NaN (failing every comparison) when a weight is not finite: tests/support/max_difference.h.
double max_difference(const io::TensorMap& a, const io::TensorMap& b) { return test_support::max_abs_difference(a, b); }

TEST(SftLora, AdaptersAreTheOnlyTrainedParametersAndSitInTheirLayersGroup) {
  const ModelShape shape = tiny_shape();
  CausalLM model(shape);
  prepare_lora(*model, lora_config(fresh_dir("groups")));
  int adapters = 0;
  for (const offload::ParameterGroup& group : offload::group_parameters(*model, /*trainable_only=*/true)) {
    for (const auto& [name, p] : group.parameters) {
      EXPECT_TRUE(io::is_lora_tensor(name)) << name << " is trainable";
      const size_t begin = std::string("model.").size();
      const std::string layer = name.substr(begin, name.find('.', begin + std::string("layers.").size()) - begin);
      EXPECT_EQ(group.name, layer) << name;
      ++adapters;
    }
  }
  EXPECT_EQ(adapters, 2 * 3 * 2);  // layers x targets x (A, B)
}

TEST(SftLora, DropoutDrawsTheSameMasksWhenCheckpointedLayersAreRecomputed) {
  torch::set_num_threads(1);
  const ModelShape shape = tiny_shape();
  Config config = lora_config(fresh_dir("dropout"));
  config.lora.dropout = 0.3;
  std::vector<const TokenizedSample*> four;
  for (size_t i = 0; i < 4; ++i) four.push_back(&samples()[i]);
  SftBatchSource::Options options;
  options.pad_id = 3;
  const MicroBatch batch = SftBatchSource({samples()[0]}, {}, options).collate_samples(four);
  std::vector<io::TensorMap> grads;
  std::vector<double> losses;
  for (bool checkpointing : {false, true}) {
    CausalLM model(shape);
    init_model_weights(*model, shape, 0.02, 11);
    prepare_lora(*model, config);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : model->named_parameters()) {
        if (item.key().find("lora_B") != std::string::npos) item.value().fill_(0.05);  // A's gradients non-zero
      }
    }
    model->train();
    auto engine = offload::make_parameter_engine(offload::EngineOptions{});
    engine->add_model("policy", offload::group_parameters(*model, false), true);
    BackboneRunner runner(*engine, checkpointing);
    SftObjective objective("policy", *model);
    torch::manual_seed(123);
    const torch::Tensor loss = objective.loss(batch, runner).sum;
    loss.backward();
    losses.push_back(loss.item<double>());
    io::TensorMap g;
    for (const auto& item : model->named_parameters()) {
      if (item.value().requires_grad()) g[item.key()] = item.value().grad().clone();
    }
    grads.push_back(std::move(g));
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-6 * std::abs(losses[0]));
  ASSERT_EQ(grads[0].size(), 12u);
  for (const auto& [name, g] : grads[0]) {
    EXPECT_GT(g.abs().max().item<double>(), 0) << name;
    EXPECT_LE((g - grads[1].at(name)).abs().max().item<double>(), 1e-5) << name;
  }
}

TEST(SftLora, OnlyAdaptersTrainAndResumeAfterACrashContinuesExactly) {
  const fs::path straight_dir = fresh_dir("straight");
  const TrainingRun reference = train(lora_config(straight_dir));
  ASSERT_EQ(reference.losses.size(), 6u);
  EXPECT_LT(reference.losses.back(), reference.losses.front());

  // Base weights bit-identical (frozen, no optimizer state, no weight decay); adapters moved.
  for (const auto& [name, t] : reference.weights) {
    if (io::is_lora_tensor(name)) {
      if (name.find("lora_B") != std::string::npos) {
        EXPECT_GT(t.abs().max().item<double>(), 0) << name;
      }
    } else {
      EXPECT_TRUE(torch::equal(t, reference.initial.at(name))) << "base weight changed: " << name;
    }
  }
  // The optimizer state the engine saved holds adapters only.
  int state_tensors = 0;
  for (const auto& entry : fs::directory_iterator(straight_dir / "step-6")) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".safetensors" || file == io::kHfWeightsFile || file.starts_with("rng")) continue;
    for (const auto& [name, t] : io::load_safetensors(entry.path())) {
      EXPECT_NE(name.find("lora_"), std::string::npos) << file << " holds optimizer state for " << name;
      ++state_tensors;
    }
  }
  EXPECT_GE(state_tensors, 2 * 12) << "Adam moments of 12 adapters";
  // The checkpoint holds base + adapters and the adapter config.
  const io::HfWeights step6(straight_dir / "step-6");
  EXPECT_TRUE(step6.contains("model.layers.1.mlp.down_proj.lora_B.weight"));
  EXPECT_TRUE(step6.contains("model.layers.1.mlp.down_proj.weight"));
  const io::LoraAdapterConfig adapter = io::read_adapter_config(straight_dir / "step-6" / io::kAdapterConfigFile);
  EXPECT_EQ(adapter.rank, 4);
  EXPECT_EQ(adapter.target_modules, (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}));

  // final/ (lora.export: merged): a plain Hugging Face folder, W + (alpha / r) B A.
  const io::TensorMap final_weights = io::load_hf_weights(straight_dir / "final");
  EXPECT_TRUE(fs::exists(straight_dir / "final" / "config.json"));
  EXPECT_TRUE(fs::exists(straight_dir / "final" / "tokenizer.model"));
  EXPECT_FALSE(fs::exists(straight_dir / "final" / io::kAdapterConfigFile));
  for (const auto& [name, t] : final_weights) EXPECT_FALSE(io::is_lora_tensor(name)) << name;
  const std::string p = "model.layers.0.self_attn.v_proj.";
  const torch::Tensor merged = reference.weights.at(p + "weight") +
                               2.0 * torch::matmul(reference.weights.at(p + "lora_B.weight"), reference.weights.at(p + "lora_A.weight"));
  EXPECT_LE((final_weights.at(p + "weight") - merged).abs().max().item<double>(), 1e-6);
  EXPECT_TRUE(torch::equal(final_weights.at("model.layers.0.self_attn.k_proj.weight"),
                           reference.initial.at("model.layers.0.self_attn.k_proj.weight")));

  // Crash in step 5, resume from step-3.
  const fs::path dir = fresh_dir("crashed");
  Config crashed = lora_config(dir);
  EXPECT_THROW(train(crashed, 5), Crash);
  EXPECT_EQ(list_checkpoints(dir), std::vector<int64_t>{3});
  crashed.train.resume = "auto";
  const TrainingRun resumed = train(crashed);
  ASSERT_EQ(resumed.losses.size(), 3u);  // steps 4, 5, 6
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(resumed.losses[i], reference.losses[3 + i], 1e-6) << "step " << 4 + i;
  EXPECT_LE(max_difference(resumed.weights, reference.weights), 1e-6);
  EXPECT_EQ(resumed.engine->step_count("policy"), 6);
  fs::remove_all(straight_dir);
  fs::remove_all(dir);
}

TEST(SftLora, AdapterExportWritesAPeftFolder) {
  const fs::path dir = fresh_dir("adapter");
  Config config = lora_config(dir);
  config.train.max_steps = 2;
  config.train.save_every = 0;
  config.lora.export_as = LoraExport::adapter;
  const TrainingRun run = train(config);
  const fs::path final_dir = dir / "final";
  EXPECT_FALSE(fs::exists(final_dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(final_dir / "config.json"));
  EXPECT_TRUE(fs::exists(final_dir / "tokenizer.model"));
  const io::TensorMap file = io::load_safetensors(final_dir / io::kAdapterWeightsFile);
  ASSERT_EQ(file.size(), 12u);
  for (const auto& [name, t] : file) {
    ASSERT_TRUE(name.starts_with("base_model.model.model.layers.")) << name;
    EXPECT_TRUE(torch::equal(t, run.weights.at(io::tensor_name_from_peft(name)))) << name;
  }
  const io::LoraAdapterConfig adapter = io::read_adapter_config(final_dir / io::kAdapterConfigFile);
  EXPECT_EQ(adapter.rank, 4);
  EXPECT_DOUBLE_EQ(adapter.alpha, 8.0);
  EXPECT_DOUBLE_EQ(adapter.dropout, 0.1);
  EXPECT_TRUE(adapter.base_model.empty()) << "trained from scratch: no base model to name";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
