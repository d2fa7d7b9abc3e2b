// LoRA on a GGUF model's own quantisation (lora.quantize_base gguf, src/model/ggml_linear.h): a
// projection of packed ggml blocks gives forward and backward equal to a dequantise-then-matmul
// reference (ggml_dequantize's reference is io::dequantize_tensor, tested bit for bit against
// gguf-py), and a tiny random GGUF Llama (tests/support/tiny_gguf_model.h: random valid blocks in
// Q4_0 ... Q6_K) loaded with its blocks trains LoRA exactly as the same file loaded dequantised
// (lora.quantize_base none): same loss and adapter gradients, no dequantised weight left alive after
// forward or backward, checkpoints carry the blocks and load back, merging dequantises.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "src/io/ggml_checkpoint.h"
#include "src/io/ggml_dequantize_tensor.h"
#include "src/io/model_path.h"
#include "src/model/ggml_linear.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/nf4_linear.h"
#include "src/model/pretrained.h"
#include "src/model/quantized_base.h"
#include "tests/support/max_difference.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_gguf_model.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using io::GgmlType;

// Weak references to every weight ggml_linear dequantises while alive.
class DequantizeWatch {
 public:
  DequantizeWatch() {
    set_ggml_dequantize_observer([this](const torch::Tensor& w) { storages_.push_back(w.storage().getWeakStorageImpl()); });
  }
  ~DequantizeWatch() { set_ggml_dequantize_observer({}); }
  size_t seen() const { return storages_.size(); }
  size_t alive() const {
    size_t n = 0;
    for (const auto& s : storages_) n += s.expired() ? 0 : 1;
    return n;
  }

 private:
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> storages_;
};

const std::vector<GgmlType> kQuantTypes = {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
                                           GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k,
                                           GgmlType::q5_k, GgmlType::q6_k};

fs::path scratch() { return test_support::process_scratch_dir("ferry_ggml_linear"); }

// The folder Ferry prepares for a tiny GGUF of `types` (see write_tiny_gguf).
fs::path gguf_model(const std::string& name, const std::vector<GgmlType>& types) {
  const fs::path file = gguf_test::write_tiny_gguf(scratch() / (name + ".gguf"), types);
  return io::prepare_gguf_model_folder(file, scratch() / "cache");
}

TEST(GgmlLinear, ForwardAndBackwardEqualDequantiseThenMatmul) {
  std::mt19937 rng(5);
  for (const GgmlType type : kQuantTypes) {
    SCOPED_TRACE(io::ggml_type_name(type));
    const at::Tensor bytes = gguf_test::random_ggml_weight(type, 24, 512, 0.1, rng);
    const io::GgmlTensor q = io::ggml_tensor_from_blocks(bytes.reshape({24, -1}), type, "test");
    ASSERT_EQ(q.shape, (std::vector<int64_t>{24, 512}));
    GgmlWeight weight(q, at::kFloat);
    // The reference: the loader's dequantisation of the same bytes, then a plain matmul.
    const torch::Tensor w = io::dequantize_tensor(type, bytes.data_ptr<uint8_t>(), {24, 512}, at::kFloat);
    const torch::Tensor x = torch::randn({3, 5, 512}, torch::requires_grad());
    const torch::Tensor x_ref = x.detach().clone().requires_grad_();
    const torch::Tensor y = ggml_linear(x, *weight);
    const torch::Tensor y_ref = torch::matmul(x_ref, w.t());
    EXPECT_LE((y - y_ref).abs().max().item<double>(), 1e-5);
    const torch::Tensor g = torch::randn_like(y);
    y.backward(g);
    y_ref.backward(g);
    EXPECT_LE((x.grad() - x_ref.grad()).abs().max().item<double>(), 1e-5);
    EXPECT_TRUE(weight->parameters().empty()) << "the blocks are a buffer, never a trainable parameter";
    // bf16 input: the weight is dequantised straight into bf16, as the loader converts.
    const torch::Tensor xb = x.detach().to(torch::kBFloat16);
    const torch::Tensor wb = io::dequantize_tensor(type, bytes.data_ptr<uint8_t>(), {24, 512}, at::kBFloat16);
    EXPECT_TRUE(torch::equal(ggml_linear(xb, *weight), torch::matmul(xb, wb.t())));
  }
}

TEST(GgmlLinear, ToDtypeLeavesTheBlocksAlone) {
  std::mt19937 rng(2);
  const at::Tensor bytes = gguf_test::random_ggml_weight(GgmlType::q4_1, 8, 64, 0.1, rng);
  GgmlWeight weight(io::ggml_tensor_from_blocks(bytes.reshape({8, -1}), GgmlType::q4_1, "test"), at::kFloat);
  weight->to(torch::kBFloat16);
  EXPECT_EQ(weight->quantized().blocks.scalar_type(), torch::kByte);
  EXPECT_TRUE(torch::equal(weight->quantized().blocks.reshape({-1}), bytes));
}

struct TwinCase {
  const char* name;
  std::vector<GgmlType> types;
};

class LoraOnGgufBase : public ::testing::TestWithParam<TwinCase> {};

// LoRA (rank 4 on q, k, v, down) on the GGUF's blocks against LoRA on the same file dequantised.
TEST_P(LoraOnGgufBase, LossAndAdapterGradientsEqualTheDequantisedTwin) {
  torch::set_num_threads(1);
  const TwinCase& c = GetParam();
  const fs::path folder = gguf_model(std::string("twin_") + c.name, c.types);
  QuantizedLoadReport report;
  CausalLM qlora = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false, &report);
  CausalLM twin = causal_lm_from_pretrained(folder, at::kFloat);
  int64_t float_projections = 0;
  for (int64_t i = 0; i < 14; ++i) {
    const GgmlType t = c.types[static_cast<size_t>(i) % c.types.size()];
    float_projections += t == GgmlType::f16 || t == GgmlType::bf16 || t == GgmlType::f32;
  }
  EXPECT_EQ(report.stored, 14 - float_projections);
  EXPECT_EQ(static_cast<int64_t>(report.kept_float.size()), float_projections);
  const QuantizedBaseSize size = quantized_base_size(*qlora);
  EXPECT_EQ(size.projections, 14 - float_projections);
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.target_modules = {"q_proj", "k_proj", "v_proj", "down_proj"};
  for (auto* m : {&qlora, &twin}) {
    apply_lora(*(*m)->model, lora, 9);
    freeze_base_weights(**m);
    torch::NoGradGuard no_grad;
    for (auto& item : (*m)->named_parameters()) {
      if (item.key().find("lora_B") != std::string::npos) item.value().fill_(0.03);
    }
  }
  const torch::Tensor ids = torch::randint(0, 2000, {2, 11});
  std::vector<torch::Tensor> losses;
  DequantizeWatch watch;
  for (auto* m : {&qlora, &twin}) {
    const torch::Tensor logits = (*m)->forward(ids);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 2000}), ids.reshape({-1}));
    if (m == &qlora) {
      EXPECT_EQ(watch.seen(), static_cast<size_t>(size.projections)) << "one dequantisation per projection in forward";
      EXPECT_EQ(watch.alive(), 0u) << "forward kept a dequantised weight for backward";
    }
    loss.backward();
    if (m == &qlora) {
      // and one more for grad_input, but for layer 0's q, k and v (quantised in every case here),
      // whose input (the normed embeddings, frozen) needs no gradient.
      EXPECT_EQ(watch.seen(), static_cast<size_t>(2 * size.projections - 3)) << "one more per grad_input";
      EXPECT_EQ(watch.alive(), 0u) << "backward kept a dequantised weight";
    }
    losses.push_back(loss.detach());
  }
  EXPECT_TRUE(std::isfinite(losses[0].item<double>()));
  EXPECT_NEAR(losses[0].item<double>(), losses[1].item<double>(), 1e-5);
  const auto twin_params = twin->named_parameters();
  int adapters = 0;
  double largest = 0, worst = 0;
  for (const auto& item : qlora->named_parameters()) {
    const bool adapter = item.key().find("lora_") != std::string::npos;
    EXPECT_EQ(item.value().grad().defined(), adapter) << item.key();
    if (!adapter) continue;
    ++adapters;
    largest = std::max(largest, twin_params[item.key()].grad().abs().max().item<double>());
    const double difference = (item.value().grad() - twin_params[item.key()].grad()).abs().max().item<double>();
    worst = test_support::max_keeping_nan(worst, difference);  // printed: a NaN shows
    EXPECT_LE(difference, 1e-5) << item.key();
  }
  std::cout << c.name << ": loss " << losses[0].item<double>() << " (dequantised twin " << losses[1].item<double>()
            << "), largest adapter gradient difference " << worst << " of gradients up to " << largest << "\n";
  EXPECT_EQ(adapters, 2 * 4 * 2);
  EXPECT_GT(largest, 1e-3) << "the gradients compared should not be vanishingly small";
}

INSTANTIATE_TEST_SUITE_P(
    Types, LoraOnGgufBase,
    ::testing::Values(TwinCase{"q4_0", {GgmlType::q4_0}}, TwinCase{"q4_1", {GgmlType::q4_1}},
                      TwinCase{"q8_0", {GgmlType::q8_0}}, TwinCase{"q4_k", {GgmlType::q4_k}},
                      TwinCase{"q6_k", {GgmlType::q6_k}},
                      // every type once, F16 and BF16 projections kept as float weights
                      TwinCase{"mixed", {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
                                         GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k,
                                         GgmlType::q5_k, GgmlType::q6_k, GgmlType::f16, GgmlType::bf16,
                                         GgmlType::q4_1, GgmlType::q3_k}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(GgufBase, StoredSizeIsTheFilesBytesPerWeight) {
  const fs::path folder = gguf_model("size_q4_1", {GgmlType::q4_1});
  CausalLM model = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false);
  const QuantizedBaseSize size = quantized_base_size(*model);
  EXPECT_EQ(size.projections, 14);
  EXPECT_EQ(size.weights, 2 * (4 * 256 * 256 / 2 + 2 * 256 * 128 + 3 * 256 * 512));
  EXPECT_DOUBLE_EQ(size.bytes_per_weight(), 0.625) << "Q4_1: 20 bytes per 32 weights";
  // The plan counts the same bytes, read from the file without loading it.
  uint64_t planned = 0;
  for (const auto& [name, bytes] : gguf_projection_bytes(folder)) planned += bytes;
  EXPECT_EQ(planned, static_cast<uint64_t>(size.bytes));
  // Embeddings, norms and the head stay float parameters.
  EXPECT_EQ(model->model->embed_tokens->weight.scalar_type(), at::kFloat);
  EXPECT_TRUE(model->lm_head->weight.defined());
}

TEST(GgufBase, CheckpointsCarryTheBlocksAndLoadBack) {
  const fs::path folder = gguf_model("ckpt", {GgmlType::q4_k, GgmlType::q5_0});
  CausalLM model = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false);
  const io::TensorMap state = state_of(*model);
  const std::string w = "model.layers.1.self_attn.k_proj.weight";
  ASSERT_EQ(state.count(w + ".ggml_type"), 1u);
  EXPECT_EQ(state.at(w).scalar_type(), torch::kByte);
  const GgmlWeightImpl& k = *ggml_weight_of(*model->model->decoder_layers[1]->self_attn->k_proj);
  EXPECT_TRUE(torch::equal(state.at(w), k.quantized().blocks));

  // Into a model loaded from the file again, whose blocks are overwritten first: they come back.
  CausalLM other = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false);
  GgmlWeightImpl& k2 = *ggml_weight_of(*other->model->decoder_layers[1]->self_attn->k_proj);
  k2.quantized().blocks.zero_();
  load_state(*other, state);
  EXPECT_TRUE(torch::equal(k2.quantized().blocks, k.quantized().blocks));
  // Into a float model: dequantised, equal to loading the file with quantize_base none.
  CausalLM plain = causal_lm_from_pretrained(folder, at::kFloat);
  CausalLM from_state(plain->config());
  load_state(*from_state, state);
  EXPECT_TRUE(torch::equal(from_state->model->decoder_layers[1]->self_attn->k_proj->weight,
                           plain->model->decoder_layers[1]->self_attn->k_proj->weight));
  // A float tensor for a ggml weight is refused: Ferry does not quantise into ggml types.
  EXPECT_THROW(load_state(*other, state_of(*plain)), InputError);
}

TEST(GgufBase, MergingDequantisesTheTargetedProjections) {
  const fs::path folder = gguf_model("merge", {GgmlType::q4_0});
  CausalLM model = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false);
  LoraConfig lora;
  lora.rank = 2;
  lora.target_modules = {"o_proj"};
  apply_lora(*model->model, lora, 1);
  const torch::Tensor ids = torch::randint(0, 2000, {1, 6});
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key().find("lora_B") != std::string::npos) item.value().fill_(0.02);
  }
  const torch::Tensor before = model->forward(ids);
  merge_lora(*model->model);
  EXPECT_EQ(ggml_weight_of(*model->model->decoder_layers[0]->self_attn->o_proj), nullptr);
  EXPECT_NE(ggml_weight_of(*model->model->decoder_layers[0]->self_attn->q_proj), nullptr);
  EXPECT_LE((model->forward(ids) - before).abs().max().item<double>(), 1e-5);
}

TEST(GgufBase, Nf4OnAGgufModelQuantisesItsDequantisedWeights) {
  const fs::path folder = gguf_model("nf4", {GgmlType::q8_0});
  CausalLM nf4 = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::nf4, true);
  CausalLM twin = causal_lm_from_pretrained(folder, at::kFloat);
  quantize_base(*twin->model, BaseQuantization::nf4, true);
  const Nf4WeightImpl* a = nf4_weight_of(*nf4->model->decoder_layers[0]->mlp->up_proj);
  const Nf4WeightImpl* b = nf4_weight_of(*twin->model->decoder_layers[0]->mlp->up_proj);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(torch::equal(a->quantized().packed, b->quantized().packed));
}

TEST(GgufBase, GgufOnAFolderWithoutAGgufIsAConfigError) {
  ModelShape c = gguf_test::tiny_gguf_shape();
  c.num_hidden_layers = 1;
  CausalLM model(c);
  const fs::path folder = scratch() / "hf";
  save_pretrained(*model, c, folder);
  try {
    causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a GGUF model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nf4 or int8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize_base(*model->model, BaseQuantization::gguf, false), ConfigError);
}

}  // namespace
}  // namespace ferry
