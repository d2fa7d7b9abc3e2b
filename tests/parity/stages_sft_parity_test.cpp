// Ferry's SFT loss, every parameter gradient and the first clipped AdamW step against transformers
// + torch.optim.AdamW (train_sft_ref.py) on a tiny random Llama, fp32, with padding and masked
// prompt tokens. Runs the real path: SftObjective through BackboneRunner, PlainEngine's norm,
// clipping and CpuAdamW, with and without activation checkpointing.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "stages/sft.h"
#include "train/backbone_runner.h"
#include "tests/support/sft_batch.h"

namespace ferry {
namespace {

std::filesystem::path fixture() {
  const auto folder = std::filesystem::path(FERRY_FIXTURES_DIR) / "train_sft";
  if (!std::filesystem::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixtures` first";
  }
  return folder;
}

class SftParity : public ::testing::TestWithParam<bool> {};  // activation checkpointing off / on

TEST_P(SftParity, LossGradientsAndFirstStepMatchTransformers) {
  torch::set_num_threads(1);
  const auto folder = fixture();
  const io::TensorMap expected = io::load_safetensors(folder / "expected.safetensors");
  const MicroBatch batch = test_support::sft_batch_from(io::load_safetensors(folder / "batch.safetensors"));
  CausalLM model = causal_lm_from_pretrained(folder / "model");
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

  int checked = 0;
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor& want = expected.at("grad." + item.key());
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const double error = (item.value().grad() - want).abs().max().item<double>();
    EXPECT_LE(error, 1e-5) << "gradient of " << item.key();
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 2 * 9 + 1);  // embed, lm_head, 9 per layer, final norm

  const double norm = engine->gradient_norm();
  EXPECT_NEAR(norm, expected.at("grad_norm").item<double>(), 1e-4);
  const double clip = std::min(1.0, 0.5 / (norm + 1e-6));  // as torch.nn.utils.clip_grad_norm_
  engine->step(1e-3, clip);
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor& want = expected.at("after_step." + item.key());
    const double error = (item.value().detach() - want).abs().max().item<double>();
    EXPECT_LE(error, 1e-6) << "weights after one step of " << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpointing, SftParity, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "checkpointed" : "plain"; });

}  // namespace
}  // namespace ferry
