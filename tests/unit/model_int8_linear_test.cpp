// The int8 frozen base (lora.quantize_base int8: src/model/int8_linear.h, quantized_base.h):
// forward and grad_input equal a naive libtorch formula (W = CB * SCB / 127, then matmul), the
// weight gets no gradient, each weight is within half a step of its original, LoRA on an int8 base
// trains like LoRA on its dequantised twin, `to(dtype)` leaves the int8 tensors alone, checkpoints
// carry bitsandbytes' Linear8bitLt names (`M.weight` int8, `M.SCB`) and load back either way, and
// merging adapters dequantises.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <vector>

#include "src/io/int8_checkpoint.h"
#include "src/model/int8_linear.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/quantized_base.h"
#include "tests/support/quantized_base_twin.h"

namespace ferry {
namespace {

// The naive formula: every code times its row's absmax over 127, in fp32.
torch::Tensor naive_weight(const kernels::Int8Tensor& q) { return q.cb.to(torch::kFloat) * q.scb.unsqueeze(1) / 127.0; }

class Int8Linear : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(Int8Linear, ForwardAndBackwardEqualTheNaiveFormula) {
  const at::ScalarType dtype = GetParam();
  torch::manual_seed(3);
  torch::nn::Linear linear(torch::nn::LinearOptions(97, 41).bias(true));  // odd sizes
  linear->to(dtype);
  const torch::Tensor original = linear->weight.detach().clone();
  set_linear_int8(*linear, kernels::int8_quantize_tensor(original));
  const Int8WeightImpl* int8 = int8_weight_of(*linear);
  ASSERT_NE(int8, nullptr);
  EXPECT_EQ(linear->parameters().size(), 1u) << "only the bias stays a parameter";
  const kernels::Int8Tensor& q = int8->quantized();
  EXPECT_EQ(q.cb.scalar_type(), torch::kChar);
  EXPECT_EQ(q.scb.scalar_type(), torch::kFloat);
  EXPECT_EQ(q.dtype, dtype);
  const torch::Tensor w = naive_weight(q);
  // Row-wise absmax quantisation: within half a step (absmax / 254) of the original, plus rounding.
  const torch::Tensor step = q.scb.unsqueeze(1) / 254.0;
  EXPECT_TRUE(((w - original.to(torch::kFloat)).abs() <= step * 1.0001 + 1e-7).all().item<bool>());
  EXPECT_TRUE(torch::equal(q.scb, original.to(torch::kFloat).abs().amax(1)));

  torch::manual_seed(5);
  const torch::Tensor x0 = torch::randn({3, 7, 97}).to(dtype);
  const torch::Tensor g = torch::randn({3, 7, 41}).to(dtype);
  torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor y = lora_project(linear, LoraAdapter{}, x, /*training=*/true);
  const torch::Tensor y_ref = torch::linear(x0.to(torch::kFloat), w, linear->bias.detach().to(torch::kFloat));
  const double tol = dtype == torch::kFloat ? 1e-5 : 5e-2;
  EXPECT_LE((y.to(torch::kFloat) - y_ref).abs().max().item<double>(), tol);
  y.backward(g);
  const torch::Tensor grad_ref = torch::matmul(g.to(torch::kFloat), w);
  EXPECT_LE((x.grad().to(torch::kFloat) - grad_ref).abs().max().item<double>(), tol);
  for (const auto& b : int8->buffers()) EXPECT_FALSE(b.grad().defined());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Int8Linear, ::testing::Values(torch::kFloat, torch::kBFloat16),
                         [](const auto& info) { return info.param == torch::kFloat ? "fp32" : "bf16"; });

using quantized_test::tiny_shape;

TEST(Int8Model, LoraOnAnInt8BaseEqualsLoraOnItsDequantisedTwin) {
  quantized_test::expect_lora_matches_dequantized_twin(
      tiny_shape(), BaseQuantization::int8, false,
      [](io::TensorMap& tensors) { io::dequantize_int8_tensors(tensors, "qlora", torch::kFloat); }, 1.0, 0.1);
}

TEST(Int8Model, CheckpointsCarryBitsandbytesNamesAndLoadEitherWay) {
  const ModelShape shape = tiny_shape();
  CausalLM model(shape);
  init_model_weights(*model, shape, 0.05, 2);
  quantize_base(*model->model, BaseQuantization::int8, false);
  model->to(torch::kBFloat16);
  const Int8WeightImpl& q = *int8_weight_of(*model->model->decoder_layers[0]->self_attn->q_proj);
  EXPECT_EQ(q.quantized().cb.scalar_type(), torch::kChar);
  EXPECT_EQ(q.quantized().scb.scalar_type(), torch::kFloat);

  const io::TensorMap state = state_of(*model);
  const std::string m = "model.layers.1.mlp.down_proj";
  EXPECT_EQ(state.at(m + ".weight").scalar_type(), torch::kChar);
  EXPECT_EQ(state.at(m + ".weight").sizes(), (c10::IntArrayRef{64, 96}));
  EXPECT_EQ(state.at(m + ".SCB").sizes(), (c10::IntArrayRef{64}));

  CausalLM other(shape);
  init_model_weights(*other, shape, 0.05, 99);
  quantize_base(*other->model, BaseQuantization::int8, false);
  io::TensorMap copy;
  for (const auto& [name, t] : state) copy[name] = t.clone();
  load_state(*other, copy);
  other->to(torch::kBFloat16);
  const io::TensorMap reloaded = state_of(*other);
  ASSERT_EQ(reloaded.size(), state.size());
  for (const auto& [name, t] : state) EXPECT_TRUE(torch::equal(t, reloaded.at(name))) << name;

  // A full-precision model takes the int8 checkpoint dequantised; an int8 one a float checkpoint
  // quantised, to the same codes (row-wise absmax of the dequantised weight is its own SCB).
  CausalLM plain(shape);
  load_state(*plain, state);
  const torch::Tensor dequantized =
      int8_weight_of(*model->model->decoder_layers[1]->mlp->down_proj)->dequantize(torch::kFloat);
  EXPECT_TRUE(torch::equal(plain->model->decoder_layers[1]->mlp->down_proj->weight, dequantized));
  CausalLM requantized(shape);
  quantize_base(*requantized->model, BaseQuantization::int8, false);
  load_state(*requantized, state_of(*plain));
  EXPECT_TRUE(torch::equal(int8_weight_of(*requantized->model->decoder_layers[1]->mlp->down_proj)->quantized().cb,
                           state.at(m + ".weight")));

  io::TensorMap exported = state;
  io::dequantize_int8_tensors(exported, "test", torch::kFloat);
  EXPECT_EQ(exported.count(m + ".SCB"), 0u);
  EXPECT_TRUE(torch::equal(exported.at(m + ".weight"), dequantized));
}

TEST(Int8Model, MergingAdaptersDequantisesTheTargetedProjections) {
  quantized_test::expect_merging_dequantises_the_targeted_projections(
      BaseQuantization::int8, [](const torch::nn::LinearImpl& linear) { return int8_weight_of(linear) != nullptr; });
}

}  // namespace
}  // namespace ferry
