// QLoRA's NF4 projection (src/model/nf4_linear.h, nf4_model.h): forward and backward equal a
// dequantise-then-matmul reference, the weight gets no gradient, the autograd graph holds no
// dequantised weight (a plain linear on the dequantised weight does, as the control shows), LoRA
// adapters on an NF4 base train like on its dequantised float twin, `to(dtype)` leaves the 4-bit
// tensors alone, and checkpoints carry bitsandbytes' names and load back.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <vector>

#include "core/error.h"
#include "kernels/cpu/nf4.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/nf4_linear.h"
#include "src/model/quantized_base.h"
#include "tests/support/quantized_base_twin.h"

namespace ferry {
namespace {

torch::nn::Linear quantized_linear(int64_t in, int64_t out, bool double_quant, at::ScalarType dtype,
                                   torch::Tensor* original = nullptr) {
  torch::manual_seed(3);
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out).bias(false));
  linear->to(dtype);
  if (original != nullptr) *original = linear->weight.detach().clone();
  quantize_linear_nf4(*linear, linear->weight.detach(), double_quant);
  return linear;
}

// Weak references to every weight nf4_linear dequantises while alive.
class DequantizeWatch {
 public:
  DequantizeWatch() {
    set_nf4_dequantize_observer([this](const torch::Tensor& w) {
      storages_.push_back(w.storage().getWeakStorageImpl());
    });
  }
  ~DequantizeWatch() { set_nf4_dequantize_observer({}); }
  size_t seen() const { return storages_.size(); }
  size_t alive() const {
    size_t n = 0;
    for (const auto& s : storages_) n += s.expired() ? 0 : 1;
    return n;
  }

 private:
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> storages_;
};

struct Case {
  at::ScalarType dtype;
  bool double_quant;
};

class Nf4Linear : public ::testing::TestWithParam<Case> {};

TEST_P(Nf4Linear, ForwardAndBackwardEqualDequantiseThenMatmul) {
  const auto [dtype, dq] = GetParam();
  torch::Tensor original;
  const torch::nn::Linear linear = quantized_linear(96, 40, dq, dtype, &original);
  const Nf4WeightImpl* nf4 = nf4_weight_of(*linear);
  ASSERT_NE(nf4, nullptr);
  EXPECT_EQ(nf4->quantized().nested(), dq);
  EXPECT_TRUE(linear->parameters().empty()) << "the float weight must be gone";

  // The reference: the kernels' scalar definition, then a plain matmul.
  const kernels::Nf4Tensor& q = nf4->quantized();
  torch::Tensor absmax = kernels::nf4_block_absmax(q).contiguous();
  torch::Tensor w_ref = torch::empty({40, 96}, torch::kFloat);
  kernels::nf4_dequantize_reference(q.packed.data_ptr<uint8_t>(), absmax.data_ptr<float>(), 40 * 96, 64,
                                    w_ref.data_ptr(), kernels::Nf4ValueType::f32);
  w_ref = w_ref.to(dtype);
  EXPECT_TRUE(torch::equal(nf4->dequantize(dtype), w_ref));
  // Within the NF4 error of the weight it came from: half the widest code gap (~0.16) times the absmax.
  const double absmax_all = original.abs().max().item<double>();
  EXPECT_LE((w_ref.to(torch::kFloat) - original.to(torch::kFloat)).abs().max().item<double>(), 0.17 * absmax_all);

  torch::manual_seed(5);
  const torch::Tensor x0 = torch::randn({3, 7, 96}).to(dtype);
  const torch::Tensor g = torch::randn({3, 7, 40}).to(dtype);
  torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor y = lora_project(linear, LoraAdapter{}, x, /*training=*/true);
  EXPECT_TRUE(torch::equal(y, torch::linear(x0, w_ref)));
  y.backward(g);
  const torch::Tensor want = torch::matmul(g, w_ref);
  const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;
  EXPECT_LE((x.grad().to(torch::kFloat) - want.to(torch::kFloat)).abs().max().item<double>(), tol);
  for (const auto& b : nf4->buffers()) EXPECT_FALSE(b.requires_grad());
  for (const auto& b : nf4->buffers()) EXPECT_FALSE(b.grad().defined());
}

TEST_P(Nf4Linear, TheGraphHoldsNoDequantisedWeight) {
  const auto [dtype, dq] = GetParam();
  const torch::nn::Linear linear = quantized_linear(128, 64, dq, dtype);
  const Nf4WeightImpl& nf4 = *nf4_weight_of(*linear);
  torch::Tensor x = torch::randn({2, 5, 128}).to(dtype).requires_grad_(true);
  {
    DequantizeWatch watch;
    const torch::Tensor y = nf4_linear(x, nf4);  // the graph lives as long as y
    ASSERT_EQ(watch.seen(), 1u);
    EXPECT_EQ(watch.alive(), 0u) << "forward kept the dequantised weight for backward";
    y.sum().backward();
    EXPECT_EQ(watch.seen(), 2u) << "backward dequantises again";
    EXPECT_EQ(watch.alive(), 0u);
  }
  // Control: a plain linear on the dequantised weight saves it for grad_input, and the watch sees that.
  {
    torch::Tensor w = nf4.dequantize(dtype);
    c10::weak_intrusive_ptr<c10::StorageImpl> weak = w.storage().getWeakStorageImpl();
    const torch::Tensor y = torch::linear(x, w);
    w = torch::Tensor();
    EXPECT_FALSE(weak.expired()) << "the control should hold the weight through its graph";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Nf4Linear,
                         ::testing::Values(Case{torch::kFloat, true}, Case{torch::kFloat, false},
                                           Case{torch::kBFloat16, true}),
                         [](const auto& info) {
                           return std::string(info.param.dtype == torch::kFloat ? "fp32" : "bf16") +
                                  (info.param.double_quant ? "_nested" : "_plain");
                         });

// A 4-bit checkpoint's weight whose quant state says bf16 used in fp32 (a bf16 download run on the
// CPU): as bitsandbytes' matmul_4bit, the weight is dequantised to bf16, then widened, forward and
// backward; set_linear_nf4 installs the stored tensors unchanged.
TEST(Nf4Linear, AStoredWeightComputesInTheInputDtypeFromItsOwnDtype) {
  torch::manual_seed(7);
  const torch::Tensor w = torch::randn({24, 100});  // 2400 elements: a partial last block
  const kernels::Nf4Tensor q = kernels::nf4_quantize_tensor(w.to(torch::kBFloat16), /*double_quant=*/true);
  ASSERT_EQ(q.dtype, torch::kBFloat16);
  torch::nn::Linear linear(torch::nn::LinearOptions(100, 24).bias(false));
  set_linear_nf4(*linear, q);
  const Nf4WeightImpl* nf4 = nf4_weight_of(*linear);
  ASSERT_NE(nf4, nullptr);
  EXPECT_TRUE(torch::equal(nf4->quantized().packed, q.packed));
  EXPECT_TRUE(torch::equal(nf4->quantized().absmax, q.absmax));
  const torch::Tensor w_ref = kernels::nf4_dequantize_tensor(q, torch::kBFloat16).to(torch::kFloat);
  ASSERT_FALSE(torch::equal(w_ref, kernels::nf4_dequantize_tensor(q, torch::kFloat)))
      << "the two roundings should differ somewhere for this test to mean anything";
  torch::Tensor x = torch::randn({3, 100}, torch::requires_grad());
  const torch::Tensor y = nf4_linear(x, *nf4);
  EXPECT_TRUE(torch::equal(y, torch::linear(x.detach(), w_ref)));
  const torch::Tensor g = torch::randn({3, 24});
  y.backward(g);
  EXPECT_TRUE(torch::allclose(x.grad(), torch::matmul(g, w_ref), 0, 1e-6));

  torch::nn::Linear wrong(torch::nn::LinearOptions(24, 100).bias(false));
  EXPECT_THROW(set_linear_nf4(*wrong, q), InputError);
}

using quantized_test::tiny_shape;

TEST(Nf4Model, LoraOnAnNf4BaseEqualsLoraOnItsDequantisedTwin) {
  quantized_test::expect_lora_matches_dequantized_twin(
      tiny_shape(), BaseQuantization::nf4, /*double_quant=*/true,
      [](io::TensorMap& tensors) { io::dequantize_nf4_tensors(tensors, "qlora"); }, 0.516, 0.01);
}

TEST(Nf4Model, ToDtypeKeepsTheFourBitTensorsAndCheckpointsRoundTrip) {
  const ModelShape shape = tiny_shape();
  CausalLM model(shape);
  init_model_weights(*model, shape, 0.05, 2);
  quantize_base_nf4(*model->model, /*double_quant=*/true);
  model->to(torch::kBFloat16);
  const Nf4WeightImpl& q = *nf4_weight_of(*model->model->decoder_layers[0]->self_attn->q_proj);
  EXPECT_EQ(q.quantized().packed.scalar_type(), torch::kByte);
  EXPECT_EQ(q.quantized().absmax.scalar_type(), torch::kByte);
  EXPECT_EQ(q.quantized().nested_absmax.scalar_type(), torch::kFloat);
  EXPECT_EQ(model->model->embed_tokens->weight.scalar_type(), torch::kBFloat16);

  const io::TensorMap state = state_of(*model);
  const std::string w = "model.layers.1.mlp.down_proj.weight";
  for (const char* suffix : {"", ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                             ".quant_state.bitsandbytes__nf4"}) {
    EXPECT_EQ(state.count(w + suffix), 1u) << w << suffix;
  }
  EXPECT_EQ(state.at(w).scalar_type(), torch::kByte);
  EXPECT_EQ(state.at(w).sizes(), (c10::IntArrayRef{64 * 96 / 2, 1}));

  CausalLM other(shape);
  init_model_weights(*other, shape, 0.05, 99);  // different weights, overwritten by the load
  quantize_base_nf4(*other->model, true);
  other->to(torch::kBFloat16);
  io::TensorMap copy;
  for (const auto& [name, t] : state) copy[name] = t.clone();
  load_state(*other, copy);
  const io::TensorMap reloaded = state_of(*other);
  ASSERT_EQ(reloaded.size(), state.size());
  for (const auto& [name, t] : state) EXPECT_TRUE(torch::equal(t, reloaded.at(name))) << name;

  // A full-precision model takes the 4-bit checkpoint dequantised; a 4-bit one a float checkpoint quantised.
  CausalLM plain(shape);
  load_state(*plain, state);
  const torch::Tensor dequantized = nf4_weight_of(*model->model->decoder_layers[1]->mlp->down_proj)->dequantize(torch::kFloat);
  EXPECT_TRUE(torch::equal(plain->model->decoder_layers[1]->mlp->down_proj->weight, dequantized));
  CausalLM requantized(shape);
  quantize_base_nf4(*requantized->model, true);
  load_state(*requantized, state_of(*plain));
  // The same codes again; the 8-bit scales move a little (their offset is the mean of the scales,
  // which the first double quantisation already rounded), so compare within 1% of the weight's range.
  const torch::Tensor again =
      nf4_weight_of(*requantized->model->decoder_layers[1]->mlp->down_proj)->dequantize(torch::kFloat);
  EXPECT_LE((again - dequantized).abs().max().item<double>(), 0.01 * dequantized.abs().max().item<double>());

  // Dequantised for export: the float weight in the dtype it was quantised from (fp32 here).
  io::TensorMap exported = state;
  io::dequantize_nf4_tensors(exported, "test");
  EXPECT_EQ(exported.count(w + ".absmax"), 0u);
  EXPECT_EQ(exported.at(w).scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(exported.at(w), nf4_weight_of(*model->model->decoder_layers[1]->mlp->down_proj)->dequantize(torch::kFloat)));
}

TEST(Nf4Model, MergingAdaptersDequantisesTheTargetedProjections) {
  quantized_test::expect_merging_dequantises_the_targeted_projections(
      BaseQuantization::nf4, [](const torch::nn::LinearImpl& linear) { return nf4_weight_of(linear) != nullptr; });
}

}  // namespace
}  // namespace ferry
