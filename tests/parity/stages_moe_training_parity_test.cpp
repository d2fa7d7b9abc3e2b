// Training a Mixture of Experts equals transformers (model_moe_ref.py's loss and gradients: cross-
// entropy + router_aux_loss_coef x the load-balancing loss, output_router_logits on), fp32 CPU,
// through Ferry's SFT path: the SftObjective, the backbone runner (its RouterLoad per forward and
// add_router_loss, as the trainer adds it) and the parameter engine. Plain and with activation
// checkpointing; and three steps under offload.policy params (every layer paged and recomputed in
// backward) equal offload.policy none's: the router's aux-loss gradient must survive a layer that
// runs again in backward.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "tests/support/sft_batch.h"
#include "train/backbone_runner.h"
#include "train/causal_lm_loss.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& family) {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "model_moe" / family;
  if (!fs::exists(folder / "moe.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture_model_moe` first";
  }
  return folder;
}

struct Case {
  std::string family;
  bool checkpointing;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.family + (info.param.checkpointing ? "_checkpointed" : "");
}

// The fixture's inputs as an SFT micro-batch: model_moe_ref.py's labels and positions (-100 on
// padding and on each row's first token).
MicroBatch fixture_batch(const fs::path& folder) {
  io::TensorMap inputs = io::load_safetensors(folder / "logits.safetensors");
  const torch::Tensor& mask = inputs.at("attention_mask");
  const torch::Tensor first =
      torch::cat({torch::ones_like(mask.narrow(1, 0, 1)), mask.narrow(1, 0, mask.size(1) - 1)}, 1) == 0;
  inputs["labels"] = inputs.at("input_ids").masked_fill((mask == 0).logical_or(first), -100);
  inputs["position_ids"] = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0);
  return test_support::sft_batch_from(inputs);
}

// The trainer's loss for one micro-batch: mean cross-entropy + coef x aux (through the runner).
torch::Tensor training_loss(BackboneRunner& runner, CausalLM& model, const MicroBatch& batch) {
  SftObjective objective("policy", *model);
  const LossSum loss = objective.loss(batch, runner);
  return runner.add_router_loss(loss.sum / static_cast<double>(batch.loss_weight));
}

class MoeTrainingParity : public ::testing::TestWithParam<Case> {};

TEST_P(MoeTrainingParity, LossAndGradientsMatchTransformers) {
  torch::set_num_threads(1);
  const Case& c = GetParam();
  const auto folder = fixture(c.family);
  const io::TensorMap expected = io::load_safetensors(folder / "moe.safetensors");
  const MicroBatch batch = fixture_batch(folder);
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  ASSERT_TRUE(model->config().moe.router_aux_loss) << "the fixture's config.json has output_router_logits on";
  model->train();
  auto engine = offload::make_parameter_engine(offload::EngineOptions{});
  engine->add_model("policy", offload::group_parameters(*model, false), true);
  BackboneRunner runner(*engine, c.checkpointing);
  engine->zero_grad();
  const torch::Tensor total = training_loss(runner, model, batch);
  total.backward();
  EXPECT_NEAR(total.item<double>(), expected.at("loss").item<double>(), 1e-5);
  const MetricValues metrics = runner.router_metrics(1.0);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_NEAR(metrics[0].value, expected.at("aux_loss").item<double>(), 1e-5) << metrics[0].name;
  int compared = 0;
  double worst = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string key = "grad." + item.key();
    ASSERT_TRUE(expected.count(key)) << "no reference gradient " << key;
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const double error = (item.value().grad() - expected.at(key)).abs().max().item<double>();
    worst = std::max(worst, error);
    EXPECT_LE(error, 1e-5) << "gradient of " << item.key();
    ++compared;
  }
  EXPECT_GT(compared, 20);
  std::cout << case_name({c, 0}) << ": loss " << total.item<double>() << ", " << compared
            << " gradients, largest difference " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Families, MoeTrainingParity,
                         ::testing::Values(Case{"qwen3_moe", false}, Case{"qwen3_moe", true}, Case{"qwen2_moe", false},
                                           Case{"qwen2_moe", true}, Case{"mixtral", true}, Case{"olmoe", true}),
                         case_name);

// Three AdamW steps under offload.policy params (every group paged, its forward run again in
// backward) give the losses offload.policy none gives, aux loss included (1e-6).
double losses_after_steps(const fs::path& folder, OffloadPolicy policy, std::vector<double>& losses) {
  const MicroBatch batch = fixture_batch(folder);
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  model->train();
  offload::EngineOptions options;
  options.policy = policy;
  auto engine = offload::make_parameter_engine(options);
  engine->add_model("policy", offload::group_parameters(*model, false), true);
  BackboneRunner runner(*engine, false);
  for (int step = 0; step < 3; ++step) {
    engine->zero_grad();
    const torch::Tensor total = training_loss(runner, model, batch);
    total.backward();
    engine->finish_gradients();
    engine->step(1e-2, 1.0);
    losses.push_back(total.item<double>());
  }
  return losses.back();
}

TEST(MoeOffloadParity, ParamsPolicyTakesNonesSteps) {
  torch::set_num_threads(1);
  for (const char* family : {"qwen3_moe", "mixtral"}) {
    std::vector<double> none, params;
    losses_after_steps(fixture(family), OffloadPolicy::none, none);
    losses_after_steps(fixture(family), OffloadPolicy::params, params);
    ASSERT_EQ(none.size(), params.size());
    for (size_t i = 0; i < none.size(); ++i) EXPECT_NEAR(params[i], none[i], 1e-6) << family << " step " << i;
    EXPECT_GT(std::abs(none.front() - none.back()), 1e-3) << family << ": the steps changed nothing";
    std::cout << family << ": losses none " << none[0] << " " << none[1] << " " << none[2] << ", params " << params[0]
              << " " << params[1] << " " << params[2] << "\n";
  }
}

}  // namespace
}  // namespace ferry
