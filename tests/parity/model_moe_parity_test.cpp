// Mixture-of-Experts models against transformers (tiny random Qwen3-MoE, Qwen2-MoE, Mixtral and
// OLMoE written by model_moe_ref.py; their fp32/bf16/fp16 logits and greedy generation are checked
// with the other families in model_llama_parity_test and generate_llama_parity_test): every sparse
// layer's router logits, the load-balancing loss over a left-padded batch, and the training loss
// (cross-entropy + router_aux_loss_coef x aux) and its gradient for every parameter, experts and
// routers included (the aux loss' gradient reaches the routers through RouterLoad).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "src/model/router_load.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& model) {
  const fs::path folder = fs::path(FERRY_FIXTURES_DIR) / "model_moe" / model;
  if (!fs::exists(folder / "moe.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture_model_moe` first";
  }
  return folder;
}

struct TrainingForward {
  torch::Tensor loss, ce;
  std::shared_ptr<RouterLoad> load;
};

// transformers' ForCausalLM loss with labels = input_ids (-100 on padding and on each row's first
// token, as model_moe_ref.py sets them): mean cross-entropy of the next token, plus coef x aux
// through the RouterLoad the model recorded into.
TrainingForward training_loss(CausalLM& model, const io::TensorMap& inputs) {
  const torch::Tensor& ids = inputs.at("input_ids");
  const torch::Tensor& mask = inputs.at("attention_mask");
  const ModelShape& config = model->config();
  auto load = std::make_shared<RouterLoad>(config.moe.num_experts, config.moe.experts_per_token,
                                           config.moe.router_aux_loss_coef, mask);
  load->keep_routing();
  model->model->set_router_load(load);
  const torch::Tensor logits = model(ids, mask);  // (B, T, V)
  model->model->set_router_load(nullptr);
  const torch::Tensor first = torch::cat({torch::ones_like(mask.narrow(1, 0, 1)), mask.narrow(1, 0, mask.size(1) - 1)}, 1) == 0;
  const torch::Tensor labels = ids.masked_fill((mask == 0).logical_or(first), -100);
  const int64_t v = logits.size(-1);
  const torch::Tensor ce = torch::nn::functional::cross_entropy(
      logits.narrow(1, 0, logits.size(1) - 1).reshape({-1, v}), labels.narrow(1, 1, labels.size(1) - 1).reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  return {ce + load->loss_term(logits.device()), ce, load};
}

class MoeParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeParity, RouterLogitsAndAuxLossMatchTransformers) {
  const fs::path folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "moe.safetensors");
  const io::TensorMap inputs = io::load_safetensors(folder / "logits.safetensors");
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  torch::NoGradGuard no_grad;
  const TrainingForward f = training_loss(model, inputs);
  int64_t layers = 0;
  for (const auto& [name, tensor] : expected) {
    if (name.rfind("router_logits_", 0) != 0) continue;
    const int64_t layer = std::stoll(name.substr(14));
    ASSERT_TRUE(f.load->router_logits().count(layer)) << "layer " << layer << " is sparse in transformers";
    const torch::Tensor& got = f.load->router_logits().at(layer);
    ASSERT_EQ(got.sizes(), tensor.sizes()) << name;
    EXPECT_LE((got.to(torch::kFloat) - tensor).abs().max().item<double>(), 1e-4) << name;
    ++layers;
  }
  EXPECT_EQ(layers, f.load->layers_recorded()) << "Ferry routes in a layer transformers runs dense";
  EXPECT_NEAR(f.load->aux_loss(), expected.at("aux_loss").item<double>(), 1e-5);
  EXPECT_NEAR(f.ce.item<double>(), expected.at("ce_loss").item<double>(), 1e-5);
  EXPECT_NEAR(f.loss.item<double>(), expected.at("loss").item<double>(), 1e-5);
  std::cout << GetParam() << ": aux " << f.load->aux_loss() << " (transformers " << expected.at("aux_loss").item<double>()
            << "), expert load " << f.load->expert_load() << "\n";
}

TEST_P(MoeParity, TrainingLossGradientsMatchTransformers) {
  const fs::path folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "moe.safetensors");
  const io::TensorMap inputs = io::load_safetensors(folder / "logits.safetensors");
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  model->train();
  const TrainingForward f = training_loss(model, inputs);
  f.loss.backward();
  EXPECT_NEAR(f.loss.item<double>(), expected.at("loss").item<double>(), 1e-5);
  int64_t compared = 0;
  double worst = 0;
  std::string worst_name;
  for (const auto& item : model->named_parameters()) {
    const auto it = expected.find("grad." + item.key());
    if (it == expected.end()) {
      // transformers leaves a gradient undefined for an expert no token chose; Ferry's is undefined or 0.
      const torch::Tensor& grad = item.value().grad();
      EXPECT_TRUE(!grad.defined() || grad.abs().max().item<double>() == 0) << item.key() << " has a gradient";
      continue;
    }
    const torch::Tensor& grad = item.value().grad();
    ASSERT_TRUE(grad.defined()) << item.key() << " has no gradient";
    const double scale = std::max(1.0, it->second.abs().max().item<double>());
    const double error = (grad - it->second).abs().max().item<double>() / scale;
    if (error > 1e-5) std::cout << "  " << item.key() << ": " << error << "\n";
    if (error > worst) {
      worst = error;
      worst_name = item.key();
    }
    ++compared;
  }
  EXPECT_LE(worst, 1e-5) << "worst: " << worst_name;
  EXPECT_GT(compared, 20);
  std::cout << GetParam() << ": " << compared << " gradients, worst relative error " << worst << " (" << worst_name << ")\n";
}

// Without the loss term in the loss, the routers get no aux-loss gradient: the router's gradient
// then differs from transformers' (which has coef x aux in its loss), by exactly the aux part.
TEST_P(MoeParity, AuxLossGradientReachesTheRouters) {
  const fs::path folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "moe.safetensors");
  const io::TensorMap inputs = io::load_safetensors(folder / "logits.safetensors");
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  model->train();
  const TrainingForward f = training_loss(model, inputs);
  f.ce.backward();  // the CE alone
  double largest_gap = 0;
  for (const auto& item : model->named_parameters()) {
    if (item.key().find(".gate.weight") == std::string::npos) continue;
    largest_gap = std::max(largest_gap, (item.value().grad() - expected.at("grad." + item.key())).abs().max().item<double>());
  }
  EXPECT_GT(largest_gap, 1e-5) << "the aux loss adds nothing to the routers' gradient: the test cannot tell";
}

// transformers 5's fused expert layout (experts.gate_up_proj, experts.down_proj) loads to the same
// model as the per-expert one: the same logits, bit for bit.
TEST(MoeLayouts, FusedExpertsLoadAsPerExpert) {
  torch::NoGradGuard no_grad;
  const fs::path folder = fixture("qwen3_moe");
  ASSERT_TRUE(fs::exists(folder / "model_fused" / "config.json"));
  const io::TensorMap inputs = io::load_safetensors(folder / "logits.safetensors");
  CausalLM per_expert = causal_lm_from_pretrained(folder / "model");
  CausalLM fused = causal_lm_from_pretrained(folder / "model_fused");
  const torch::Tensor a = per_expert(inputs.at("input_ids"), inputs.at("attention_mask"));
  const torch::Tensor b = fused(inputs.at("input_ids"), inputs.at("attention_mask"));
  EXPECT_TRUE(torch::equal(a, b)) << (a - b).abs().max();
}

INSTANTIATE_TEST_SUITE_P(Families, MoeParity, ::testing::Values("qwen3_moe", "qwen2_moe", "mixtral", "olmoe"));

}  // namespace
}  // namespace ferry
