// LoRA on a GGUF base (lora.quantize_base gguf) in the offload engines: the projections' packed
// ggml blocks are frozen weights the engine places, pages and counts at their stored size (Q4_1:
// 0.625 bytes per weight) under every offload policy, and a few training steps give the same losses
// and adapters under none, optimizer and params (the paged blocks are dequantised in forward and
// backward).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "offload/engine.h"
#include "src/io/model_path.h"
#include "src/model/lora.h"
#include "src/model/quantized_base.h"
#include "tests/support/offload_training.h"
#include "tests/support/tiny_gguf_model.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

const fs::path& q4_1_model() {
  static const fs::path folder = [] {
    const fs::path dir = test_support::process_scratch_dir("ferry_gguf_engine");
    const fs::path file = gguf_test::write_tiny_gguf(dir / "q4_1.gguf", {io::GgmlType::q4_1});
    return io::prepare_gguf_model_folder(file, dir / "cache");
  }();
  return folder;
}

CausalLM lora_on_gguf_base() {
  CausalLM model = causal_lm_from_pretrained_quantized(q4_1_model(), at::kFloat, BaseQuantization::gguf, false);
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.target_modules = {"q_proj", "v_proj", "down_proj"};
  apply_lora(*model->model, lora, 3);
  freeze_base_weights(*model);
  model->train();
  return model;
}

struct PolicyRun {
  double bytes_per_base_weight = 0;  // the engine's weight bytes less the float parameters', per base weight
  std::vector<double> losses;
  double lora_b = 0;  // sum |lora_B| after training (zero at the start)
};

PolicyRun run(OffloadPolicy policy) {
  torch::set_num_threads(1);
  CausalLM model = lora_on_gguf_base();
  const QuantizedBaseSize base = quantized_base_size(*model);
  uint64_t float_bytes = 0;
  for (const auto& item : model->named_parameters()) float_bytes += item.value().nbytes();
  Config config;
  config.output.dir = offload_test::fresh_dir("gguf_" + std::string(enum_name(policy))).string();
  config.output.keep_last = 1;
  config.logging.progress = ProgressMode::never;
  config.logging.tensorboard = false;
  config.train.precision = Precision::fp32;
  config.train.learning_rate = 3e-3;
  config.train.micro_batch_size = 2;
  config.train.max_steps = 4;
  config.train.warmup_steps = 0;
  config.offload.policy = policy;
  offload::EngineOptions options = offload::EngineOptions::from_config(config);
  options.device = c10::Device(c10::kCPU);
  auto engine = offload::make_parameter_engine(options);
  engine->add_model("policy", offload::group_parameters(*model, /*trainable_only=*/false), true);
  // Where the weights live at rest: on the device under none and optimizer, on the host under params.
  const offload::MemoryTier tier = policy == OffloadPolicy::params ? offload::MemoryTier::host : offload::MemoryTier::device;
  const uint64_t weight_bytes = engine->accountant().current(tier, offload::MemoryCategory::weights);
  PolicyRun out;
  out.bytes_per_base_weight = static_cast<double>(weight_bytes - float_bytes) / static_cast<double>(base.weights);

  offload_test::RandomTokens data(2000, 2, 16, 11);
  offload_test::NextTokenLoss objective(*model);
  TrainedModel trained;
  trained.name = "policy";
  trained.save = [&](const fs::path& folder) { io::save_safetensors(folder / "model.safetensors", state_of(*model)); };
  trained.load = [&](const fs::path& folder) { load_state(*model, io::load_safetensors(folder / "model.safetensors")); };
  std::ostringstream console;
  MetricsLoggerOptions quiet;
  quiet.console = &console;
  quiet.console_is_terminal = false;
  Trainer trainer(config, *engine, data, objective, trained, &console, quiet);
  trainer.on_step = [&](int64_t, double loss) { out.losses.push_back(loss); };
  trainer.run();
  engine->with_weights("policy", offload::ParameterEngine::WeightAccess::read, [&] {
    for (const auto& item : model->named_parameters()) {
      if (item.key().find("lora_B") != std::string::npos) out.lora_b += item.value().abs().sum().item<double>();
    }
  });
  return out;
}

TEST(GgufBaseEngine, CountsTheBlocksAsStoredAndTrainsAlikeUnderEveryPolicy) {
  const PolicyRun none = run(OffloadPolicy::none);
  std::cout << "none: " << none.bytes_per_base_weight << " engine bytes per base weight\n";
  EXPECT_DOUBLE_EQ(none.bytes_per_base_weight, 0.625) << "Q4_1: 20 bytes per 32 weights";
  ASSERT_EQ(none.losses.size(), 4u);
  EXPECT_GT(none.lora_b, 0.0) << "the adapters should have trained";
  for (const OffloadPolicy policy : {OffloadPolicy::optimizer, OffloadPolicy::params}) {
    const PolicyRun r = run(policy);
    std::cout << enum_name(policy) << ": " << r.bytes_per_base_weight << " engine bytes per base weight\n";
    // Chunks align every tensor to 256 bytes: a little padding on top of the blocks.
    EXPECT_GE(r.bytes_per_base_weight, 0.625) << enum_name(policy);
    EXPECT_LE(r.bytes_per_base_weight, 0.63) << enum_name(policy);
    ASSERT_EQ(r.losses.size(), none.losses.size()) << enum_name(policy);
    for (size_t i = 0; i < r.losses.size(); ++i) {
      EXPECT_NEAR(r.losses[i], none.losses[i], 1e-5 * none.losses[i]) << enum_name(policy) << " step " << i + 1;
    }
    EXPECT_NEAR(r.lora_b, none.lora_b, 1e-4 * none.lora_b) << enum_name(policy);
  }
}

}  // namespace
}  // namespace ferry
