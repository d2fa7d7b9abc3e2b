// Ferry's LoRA SFT against peft (sft_lora_ref.py, stages_sft_lora_check.py), fp32 CPU:
//   - loss, the gradient of every lora_A/lora_B and the first clipped AdamW step over the adapters
//     equal peft's (get_peft_model on the same base and the same adapter values, read from peft's
//     own adapter folder), with and without activation checkpointing; the base gets no gradient;
//   - after a short `train-sft` run with lora.export=adapter, peft loads final/ onto the base model
//     and transformers loads `ferry export --lora merged` of the last checkpoint, and both give the
//     trained Ferry model's logits (<= 1e-4); `ferry export --lora adapter` of that checkpoint
//     writes final/'s adapter again.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>

#include "offload/engine.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/lora_adapter.h"
#include "src/io/safetensors.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/tokenizer.h"
#include "stages/sft.h"
#include "tests/support/max_difference.h"
#include "train/backbone_runner.h"
#include "tests/support/sft_batch.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "sft_lora";
  if (!fs::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

// The settings of the reference's peft LoraConfig.
Config lora_config() {
  Config c;
  c.lora.rank = 4;
  c.lora.alpha = 8;
  c.lora.dropout = 0.0;
  c.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return c;
}

class SftLoraParity : public ::testing::TestWithParam<bool> {};  // activation checkpointing off / on

TEST_P(SftLoraParity, LossAdapterGradientsAndFirstStepMatchPeft) {
  torch::set_num_threads(1);
  const auto folder = fixture();
  const io::TensorMap expected = io::load_safetensors(folder / "expected.safetensors");
  const MicroBatch batch = test_support::sft_batch_from(io::load_safetensors(folder / "batch.safetensors"));
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  const Config config = lora_config();
  prepare_lora(*model, config);
  const io::PeftAdapter adapter = io::read_peft_adapter(folder / "init_adapter");
  EXPECT_EQ(adapter.config.rank, 4);
  EXPECT_DOUBLE_EQ(adapter.config.alpha, 8.0);
  load_lora_state(*model, adapter.tensors, "init_adapter");
  model->train();

  offload::EngineOptions options;
  options.beta1 = 0.9;
  options.beta2 = 0.95;
  options.eps = 1e-8;
  options.weight_decay = 0.1;
  auto engine = offload::make_parameter_engine(options);
  engine->add_model("policy", offload::group_parameters(*model, false), true);
  BackboneRunner runner(*engine, /*activation_checkpointing=*/GetParam());
  SftObjective objective("policy", *model);

  engine->zero_grad();
  const LossSum loss = objective.loss(batch, runner);
  const torch::Tensor mean = loss.sum / static_cast<double>(batch.loss_weight);
  mean.backward();
  EXPECT_NEAR(mean.item<double>(), expected.at("loss").item<double>(), 1e-5);

  int adapters = 0;
  double worst = 0;
  for (const auto& item : model->named_parameters()) {
    if (!io::is_lora_tensor(item.key())) {
      EXPECT_FALSE(item.value().grad().defined()) << "frozen base weight got a gradient: " << item.key();
      continue;
    }
    const torch::Tensor& want = expected.at("grad." + item.key());
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    ASSERT_GT(want.abs().max().item<double>(), 0) << "reference gradient of " << item.key() << " is zero";
    const double error = (item.value().grad() - want).abs().max().item<double>();
    worst = test_support::max_keeping_nan(worst, error);  // printed: a NaN shows
    EXPECT_LE(error, 1e-5) << "gradient of " << item.key();
    ++adapters;
  }
  EXPECT_EQ(adapters, 2 * 7 * 2);  // 2 layers x 7 projections x (A, B)
  std::cout << "largest adapter gradient difference " << worst << "\n";

  const double norm = engine->gradient_norm();
  EXPECT_NEAR(norm, expected.at("grad_norm").item<double>(), 1e-4);
  const double clip = std::min(1.0, 0.5 / (norm + 1e-6));
  engine->step(1e-3, clip);
  for (const auto& [name, value] : lora_state(*model)) {
    const double error = (value - expected.at("after_step." + name)).abs().max().item<double>();
    EXPECT_LE(error, 1e-6) << "adapter after one step: " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpointing, SftLoraParity, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "checkpointed" : "plain"; });

int run_checker(const std::string& args) {
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/stages_sft_lora_check.py' " + args;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(SftLoraExport, PeftLoadsTheAdapterAndTransformersTheMergedModelWithFerrysLogits) {
  torch::set_num_threads(1);
  const auto folder = fixture();
  const std::string root = FERRY_SOURCE_DIR;
  const fs::path dir = fs::temp_directory_path() / ("ferry_sft_lora_parity_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Config config = lora_config();
  config.lora.dropout = 0.1;  // exercised in training; the logits below are in eval mode
  config.lora.export_as = LoraExport::adapter;
  config.model.path = (folder / "model").string();
  config.tokenizer.path = root + "/data/tokenizer.model";
  config.tokenizer.chat_template = "demo";
  config.data.train_file = root + "/data/sft_train.jsonl";
  config.data.max_samples = 16;
  config.data.max_length = 64;
  config.train.device = Device::cpu;
  config.train.learning_rate = 1e-2;
  config.train.warmup_steps = 0;
  config.train.micro_batch_size = 4;
  config.train.max_steps = 3;
  config.output.dir = dir.string();
  config.logging.progress = ProgressMode::never;
  config.logging.tensorboard = false;
  fs::create_directories(dir);
  run_sft(config);

  const fs::path final_dir = dir / "final", step = dir / "step-3";
  EXPECT_TRUE(fs::exists(final_dir / io::kAdapterConfigFile));
  EXPECT_TRUE(fs::exists(final_dir / io::kAdapterWeightsFile));
  EXPECT_TRUE(fs::exists(final_dir / "tokenizer.model"));
  EXPECT_FALSE(fs::exists(final_dir / "model.safetensors")) << "an adapter folder holds no base weights";

  // The trained model as Ferry resumes it from the last checkpoint: base + adapters, not merged.
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  prepare_lora(*model, config);
  stage_trained_model("policy", *model, model->config(), config, Tokenizer(config.tokenizer.path)).load(step);
  model->eval();
  double largest_b = 0;
  for (const auto& [name, t] : lora_state(*model)) {
    if (name.find("lora_B") != std::string::npos) largest_b = std::max(largest_b, t.abs().max().item<double>());
  }
  EXPECT_GT(largest_b, 1e-4) << "training did not move the adapters";
  const io::TensorMap batch = io::load_safetensors(folder / "batch.safetensors");
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = model->forward(batch.at("input_ids"), batch.at("attention_mask"));  // (B, T, V)
  }
  io::save_safetensors(dir / "ferry_logits.safetensors", {{"input_ids", batch.at("input_ids")},
                                                          {"attention_mask", batch.at("attention_mask")},
                                                          {"logits", logits.contiguous()}});

  // `ferry export` of the last checkpoint, as a user runs it: merged, and as an adapter, which must
  // be final/'s adapter.
  const std::string ferry = std::string("'") + FERRY_BINARY + "' export --checkpoint '" + step.string() + "' --output '";
  ASSERT_EQ(std::system((ferry + (dir / "merged").string() + "' --lora merged").c_str()), 0);
  ASSERT_EQ(std::system((ferry + (dir / "adapter").string() + "' --lora adapter").c_str()), 0);
  EXPECT_TRUE(fs::exists(dir / "merged" / "config.json"));
  const io::TensorMap exported = io::load_safetensors(dir / "adapter" / io::kAdapterWeightsFile);
  const io::TensorMap trained = io::load_safetensors(final_dir / io::kAdapterWeightsFile);
  EXPECT_EQ(exported.size(), 28u);
  ASSERT_EQ(exported.size(), trained.size());
  for (const auto& [name, t] : trained) EXPECT_TRUE(torch::equal(t, exported.at(name))) << name;

  const std::string args = "'" + (folder / "model").string() + "' '" + final_dir.string() + "' '" +
                           (dir / "merged").string() + "' '" + (dir / "ferry_logits.safetensors").string() + "'";
  EXPECT_EQ(run_checker(args), 0) << "peft or transformers disagree with Ferry (see the lines above)";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
