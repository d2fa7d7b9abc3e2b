// `lora.quantize_base: int8` through the CLI: train-sft on the demo-shaped model with its frozen
// projections in row-wise int8 (src/model/int8_linear.h) trains, its checkpoint holds the base as
// bitsandbytes names a Linear8bitLt (`M.weight` int8 + `M.SCB`), resuming from it continues, and
// `ferry export` writes a full-precision folder Ferry loads again; a model folder stored in 4 bits
// is refused for int8 with exit 2 naming lora.quantize_base.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "src/io/hf_checkpoint.h"
#include "src/model/pretrained.h"
#include "tests/integration/ferry_process.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using ferry_test::run_ferry;

std::string sft_args(const fs::path& out, int steps) {
  return "train-sft --config configs/demo-sft-qlora.yaml --set model.path= --set model.config=configs/demo-model.json"
         " --set lora.quantize_base=int8 --set lora.export=merged --set output.dir=" + out.string() +
         " --set data.eval_file= --set data.prompt_file= --set data.max_samples=16 --set train.micro_batch_size=4"
         " --set train.max_steps=" + std::to_string(steps) + " --set train.save_every=2 --set train.eval_every=0" +
         ferry_test::kQuietCpu;
}

TEST(QloraInt8Cli, TrainsResumesAndExports) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_qlora_int8_cli");
  fs::remove_all(dir);
  const auto first = run_ferry(sft_args(dir / "run", 2));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_CONTAINS(first.output, "QLoRA base: 28 projections");
  EXPECT_CONTAINS(first.output, "in int8: ");
  const io::TensorMap step = io::load_hf_weights(dir / "run" / "step-2");
  const std::string m = "model.layers.0.self_attn.q_proj";
  ASSERT_EQ(step.count(m + ".SCB"), 1u);
  EXPECT_EQ(step.at(m + ".weight").scalar_type(), torch::kChar);
  EXPECT_EQ(step.at(m + ".weight").sizes(), (c10::IntArrayRef{128, 128}));
  EXPECT_EQ(step.at(m + ".SCB").scalar_type(), torch::kFloat);

  const auto resumed = run_ferry(sft_args(dir / "run", 4) + " --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(fs::exists(dir / "run" / "step-4"));

  const auto exported =
      run_ferry("export --checkpoint " + (dir / "run" / "step-4").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const io::TensorMap out = io::load_hf_weights(dir / "out");
  EXPECT_EQ(out.count(m + ".SCB"), 0u);
  EXPECT_EQ(out.at(m + ".weight").scalar_type(), torch::kFloat);
  CausalLM model = causal_lm_from_pretrained(dir / "out");
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::isfinite(model->forward(torch::tensor({{1, 5, 9}}))).all().item<bool>());
  fs::remove_all(dir);
}

TEST(QloraInt8Cli, AFolderStoredInFourBitsIsRefused) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_qlora_int8_refuse");
  fs::remove_all(dir);
  const auto nf4 = run_ferry(sft_args(dir / "nf4", 2) + " --set lora.quantize_base=nf4");
  ASSERT_EQ(nf4.exit_code, 0) << nf4.output;
  const auto refused = run_ferry(sft_args(dir / "int8", 1) + " --set model.config= --set model.path=" +
                                 (dir / "nf4" / "step-2").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_CONTAINS(refused.output, "lora.quantize_base int8: model folder " + (dir / "nf4" / "step-2").string() +
                                      " stores model.layers.0.self_attn.q_proj.weight");
  EXPECT_CONTAINS(refused.output, "set lora.quantize_base=nf4");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
