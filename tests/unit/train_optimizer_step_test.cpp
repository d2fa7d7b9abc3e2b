// The one optimizer step (train/optimizer_step.h) against torch's own: gradients clipped by
// torch::nn::utils::clip_grad_norm_ then torch::optim::AdamW; a non-finite gradient skips the
// update and leaves the weights alone; under fp16 loss scaling the norm is reported unscaled, the
// update is the unscaled one and the scaler halves on overflow; models not named are not stepped.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <limits>

#include "offload/engine.h"
#include "train/loss_scaler.h"
#include "train/optimizer_step.h"

namespace ferry {
namespace {

offload::EngineOptions adam_options() {
  offload::EngineOptions o;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0.0;
  return o;
}

std::vector<offload::ParameterGroup> groups_of(const torch::Tensor& weight) {
  return {offload::ParameterGroup{"layers.0", {{"model.layers.0.mlp.up_proj.weight", weight}}}};
}

TEST(OptimizerStep, ClipsAsTorchClipGradNormThenStepsAsAdamW) {
  torch::manual_seed(0);
  torch::Tensor ours = torch::randn({6, 4}).requires_grad_(true);
  torch::Tensor ref = ours.detach().clone().requires_grad_(true);
  torch::optim::AdamW reference({ref}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0));
  auto engine = offload::make_parameter_engine(adam_options());
  engine->add_model("policy", groups_of(ours), true);
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor grad = torch::randn({6, 4}) * 3.0;
    engine->zero_grad();
    ours.mutable_grad() = grad.clone();
    ref.mutable_grad() = grad.clone();
    const double torch_norm = torch::nn::utils::clip_grad_norm_(std::vector<torch::Tensor>{ref}, 0.5);
    reference.step();
    finish_step_gradients(*engine);
    OptimizerStep request;
    request.learning_rate = 1e-2;
    request.max_grad_norm = 0.5;
    const OptimizerStepOutcome outcome = take_optimizer_step(*engine, request);
    EXPECT_TRUE(outcome.finite);
    EXPECT_NEAR(outcome.grad_norm, torch_norm, 1e-5 * torch_norm);
  }
  EXPECT_LE((ours - ref).abs().max().item<double>(), 1e-6);
  EXPECT_EQ(engine->step_count("policy"), 3);
  EXPECT_DOUBLE_EQ(clip_multiplier(0, 100), 1.0);
  EXPECT_DOUBLE_EQ(clip_multiplier(1, 0.5), 1.0);
  EXPECT_NEAR(clip_multiplier(1, 4), 0.25, 1e-6);
}

TEST(OptimizerStep, NonFiniteGradientsSkipTheUpdate) {
  torch::manual_seed(1);
  torch::Tensor ours = torch::randn({3, 3}).requires_grad_(true);
  const torch::Tensor before = ours.detach().clone();
  auto engine = offload::make_parameter_engine(adam_options());
  engine->add_model("policy", groups_of(ours), true);
  ours.mutable_grad() = torch::ones({3, 3});
  ours.mutable_grad()[1][2] = std::numeric_limits<float>::infinity();
  finish_step_gradients(*engine);
  OptimizerStep request;
  request.learning_rate = 1e-2;
  request.max_grad_norm = 1.0;
  const OptimizerStepOutcome outcome = take_optimizer_step(*engine, request);
  EXPECT_FALSE(outcome.finite);
  EXPECT_TRUE(torch::equal(ours.detach(), before));
  EXPECT_EQ(engine->step_count("policy"), 0);
}

TEST(OptimizerStep, LossScaleIsTakenOutOfTheNormAndTheUpdate) {
  torch::manual_seed(2);
  torch::Tensor scaled = torch::randn({5, 2}).requires_grad_(true);
  torch::Tensor plain = scaled.detach().clone().requires_grad_(true);
  auto scaled_engine = offload::make_parameter_engine(adam_options());
  scaled_engine->add_model("m", groups_of(scaled), true);
  auto plain_engine = offload::make_parameter_engine(adam_options());
  plain_engine->add_model("m", groups_of(plain), true);
  LossScaler scaler(true, 1024.0);
  const torch::Tensor grad = torch::randn({5, 2});
  scaled.mutable_grad() = grad * 1024.0;
  plain.mutable_grad() = grad.clone();
  finish_step_gradients(*scaled_engine);
  finish_step_gradients(*plain_engine);
  OptimizerStep request;
  request.learning_rate = 1e-2;
  request.max_grad_norm = 0.1;
  const OptimizerStepOutcome plain_outcome = take_optimizer_step(*plain_engine, request);
  request.scaler = &scaler;
  const OptimizerStepOutcome scaled_outcome = take_optimizer_step(*scaled_engine, request);
  EXPECT_NEAR(scaled_outcome.grad_norm, plain_outcome.grad_norm, 1e-5 * plain_outcome.grad_norm);
  EXPECT_NEAR(scaled_outcome.grad_norm, grad.norm().item<double>(), 1e-5 * grad.norm().item<double>());
  EXPECT_LE((scaled - plain).abs().max().item<double>(), 1e-6);
  // Overflow: skipped, and the scale halves.
  scaled.mutable_grad() = torch::full({5, 2}, std::numeric_limits<float>::quiet_NaN());
  finish_step_gradients(*scaled_engine);
  EXPECT_FALSE(take_optimizer_step(*scaled_engine, request).finite);
  EXPECT_DOUBLE_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaled_engine->step_count("m"), 1);
}

TEST(OptimizerStep, StepsOnlyTheModelsItNames) {
  torch::manual_seed(3);
  torch::Tensor policy = torch::randn({4, 4}).requires_grad_(true);
  torch::Tensor critic = torch::randn({4, 4}).requires_grad_(true);
  const torch::Tensor critic_before = critic.detach().clone();
  auto engine = offload::make_parameter_engine(adam_options());
  engine->add_model("policy", groups_of(policy), true);
  engine->add_model("critic", {offload::ParameterGroup{"layers.0", {{"model.layers.0.mlp.down_proj.weight", critic}}}}, true);
  policy.mutable_grad() = torch::randn({4, 4});
  critic.mutable_grad() = torch::randn({4, 4}) * 100.0;
  finish_step_gradients(*engine);
  OptimizerStep request;
  request.learning_rate = 1e-2;
  request.models = {"policy"};
  const OptimizerStepOutcome outcome = take_optimizer_step(*engine, request);
  EXPECT_NEAR(outcome.grad_norm, policy.grad().norm().item<double>(), 1e-5 * outcome.grad_norm);
  EXPECT_EQ(engine->step_count("policy"), 1);
  EXPECT_EQ(engine->step_count("critic"), 0);
  EXPECT_TRUE(torch::equal(critic.detach(), critic_before));
}

}  // namespace
}  // namespace ferry
