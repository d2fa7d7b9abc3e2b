// LoRA on a Llama model without files: adapter names, shapes and PEFT's initialisation, frozen
// base weights, dropout only in training, merging (the merged model computes what base + adapters
// computed; Qwen3's q/k norms frozen and kept), the adapter file names and merge of
// src/io/lora_adapter.h, and errors naming the key.
// Agreement with peft itself is tests/parity/stages_sft_lora_parity_test.cpp.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "src/io/lora_adapter.h"
#include "src/model/model_heads.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry {
namespace {

ModelShape tiny_config() { return test_support::tiny_llama_config(101, 96); }

LoraConfig all_targets(int64_t rank = 4) {
  LoraConfig l;
  l.rank = rank;
  l.alpha = 8;
  l.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return l;
}

CausalLM tiny_model() {
  const ModelShape c = tiny_config();
  CausalLM model(c);
  init_model_weights(*model, c, 0.2, 3);
  model->eval();
  return model;
}

// Sets every lora_B to random values (B starts at zero, which would make the adapters no-ops).
void randomize_b(CausalLMImpl& model) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (auto& item : model.named_parameters()) {
    if (item.key().find("lora_B") != std::string::npos) item.value().copy_(torch::randn(item.value().sizes()) * 0.3);
  }
}

torch::Tensor input_ids() { return torch::tensor({{1, 5, 9, 33, 2, 7}, {4, 8, 15, 16, 23, 42}}, torch::kLong); }

TEST(ModelLora, AdaptersAreNamedAsPeftWithPeftsInitialisation) {
  CausalLM model = tiny_model();
  LoraConfig l = all_targets();
  l.target_modules = {"q_proj", "down_proj"};
  apply_lora(*model->model, l, 7);
  EXPECT_TRUE(has_lora(*model->model));
  const io::TensorMap adapters = lora_state(*model);
  ASSERT_EQ(adapters.size(), 2u * 2u * 2u);
  const auto& a = adapters.at("model.layers.0.self_attn.q_proj.lora_A.weight");
  const auto& b = adapters.at("model.layers.0.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(adapters.at("model.layers.1.mlp.down_proj.lora_A.weight").sizes(), (std::vector<int64_t>{4, 96}));
  EXPECT_EQ(adapters.at("model.layers.1.mlp.down_proj.lora_B.weight").sizes(), (std::vector<int64_t>{64, 4}));
  // kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)); B = 0.
  EXPECT_LE(a.abs().max().item<double>(), 1.0 / std::sqrt(64.0));
  EXPECT_GT(a.abs().max().item<double>(), 0.9 / std::sqrt(64.0));
  EXPECT_NEAR(a.mean().item<double>(), 0.0, 0.02);
  EXPECT_EQ(b.abs().max().item<double>(), 0.0);
  EXPECT_FALSE(torch::equal(a, adapters.at("model.layers.1.self_attn.q_proj.lora_A.weight")));
  EXPECT_THROW(apply_lora(*model->model, l, 7), UserError);

  // The same seed gives the same adapters.
  CausalLM again = tiny_model();
  apply_lora(*again->model, l, 7);
  for (const auto& [name, t] : lora_state(*again)) EXPECT_TRUE(torch::equal(t, adapters.at(name))) << name;
}

TEST(ModelLora, ZeroBLeavesTheModelUnchangedAndOnlyAdaptersStayTrainable) {
  CausalLM model = tiny_model();
  torch::NoGradGuard no_grad;
  const torch::Tensor before = model->forward(input_ids());
  apply_lora(*model->model, all_targets(), 1);
  freeze_base_weights(*model);
  EXPECT_TRUE(torch::allclose(model->forward(input_ids()), before, 0, 0));
  int trainable = 0;
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(item.value().requires_grad(), io::is_lora_tensor(item.key())) << item.key();
    trainable += item.value().requires_grad();
  }
  EXPECT_EQ(trainable, 2 * 7 * 2);
}

// Qwen3's q/k norms are base weights like any other: frozen under LoRA (the adapters sit on the
// projections before them), untouched by the merge, and the merged model computes what base +
// adapters computed.
TEST(ModelLora, Qwen3NormsStayFrozenAndTheMergeStillMatches) {
  ModelShape c = tiny_config();
  c.model_type = "qwen3";
  c.qk_norm = QkNorm::per_head;
  c.head_dim = 32;
  CausalLM model(c);
  init_model_weights(*model, c, 0.2, 3);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      if (item.key().find("_norm.weight") != std::string::npos) item.value().uniform_(0.5, 1.5);
    }
  }
  apply_lora(*model->model, all_targets(), 2);
  freeze_base_weights(*model);
  randomize_b(*model);
  model->train();
  model->forward(input_ids()).sum().backward();
  int64_t trainable = 0;
  for (const auto& item : model->named_parameters()) {
    const bool adapter = item.key().find("lora_") != std::string::npos;
    EXPECT_EQ(item.value().requires_grad(), adapter) << item.key();
    if (adapter) {
      EXPECT_TRUE(item.value().grad().defined()) << item.key();
    }
    trainable += item.value().requires_grad();
  }
  EXPECT_EQ(trainable, 2 * 7 * 2);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor q_norm = model->named_parameters()["model.layers.1.self_attn.q_norm.weight"].clone();
  const torch::Tensor adapted = model->forward(input_ids());
  merge_lora(*model->model);
  EXPECT_LE((model->forward(input_ids()) - adapted).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(torch::equal(model->named_parameters()["model.layers.1.self_attn.q_norm.weight"], q_norm));
}

TEST(ModelLora, MergedModelComputesWhatBasePlusAdaptersComputed) {
  CausalLM model = tiny_model();
  apply_lora(*model->model, all_targets(), 2);
  randomize_b(*model);
  torch::NoGradGuard no_grad;
  const torch::Tensor base_only = [&] {
    CausalLM plain = tiny_model();
    return plain->forward(input_ids());
  }();
  const torch::Tensor adapted = model->forward(input_ids());
  ASSERT_GT((adapted - base_only).abs().max().item<double>(), 1e-2) << "the adapters should change the logits";
  const io::TensorMap before = [&] {
    io::TensorMap copy;
    for (const auto& [name, t] : state_of(*model)) copy[name] = t.clone();
    return copy;
  }();

  merge_lora(*model->model);
  EXPECT_FALSE(has_lora(*model->model));
  EXPECT_TRUE(lora_state(*model).empty());
  EXPECT_EQ(model->named_parameters().size(), tiny_model()->named_parameters().size());
  const double error = (model->forward(input_ids()) - adapted).abs().max().item<double>();
  EXPECT_LE(error, 1e-5);

  // The tensor-level merge (what `ferry export --lora merged` does) gives the same weights.
  const io::TensorMap merged = io::merge_lora_tensors(before, 8.0 / 4.0);
  const io::TensorMap live = state_of(*model);
  ASSERT_EQ(merged.size(), live.size());
  for (const auto& [name, t] : live) EXPECT_LE((t - merged.at(name)).abs().max().item<double>(), 1e-6) << name;
  // W + 2 * B @ A, written out for one projection.
  const std::string p = "model.layers.1.mlp.up_proj.";
  const torch::Tensor expected =
      before.at(p + "weight") + 2.0 * torch::matmul(before.at(p + "lora_B.weight"), before.at(p + "lora_A.weight"));
  EXPECT_LE((live.at(p + "weight") - expected).abs().max().item<double>(), 1e-6);
}

TEST(ModelLora, DropoutActsInTrainingOnly) {
  CausalLM model = tiny_model();
  LoraConfig l = all_targets();
  l.dropout = 0.5;
  apply_lora(*model->model, l, 2);
  randomize_b(*model);
  CausalLM no_dropout = tiny_model();
  apply_lora(*no_dropout->model, all_targets(), 2);
  load_lora_state(*no_dropout, lora_state(*model), "test");
  torch::NoGradGuard no_grad;
  model->eval();
  no_dropout->eval();
  EXPECT_LE((model->forward(input_ids()) - no_dropout->forward(input_ids())).abs().max().item<double>(), 1e-6);
  model->train();
  torch::manual_seed(0);
  const torch::Tensor first = model->forward(input_ids());
  const torch::Tensor second = model->forward(input_ids());
  EXPECT_GT((first - second).abs().max().item<double>(), 1e-4);
}

TEST(ModelLora, LoadingAdaptersChecksNamesAndShapes) {
  CausalLM model = tiny_model();
  apply_lora(*model->model, all_targets(4), 1);
  io::TensorMap tensors = lora_state(*model);
  tensors.erase("model.layers.1.mlp.up_proj.lora_B.weight");
  tensors["model.layers.0.self_attn.q_proj.lora_A.weight"] = torch::zeros({8, 64});
  tensors["model.layers.9.self_attn.q_proj.lora_A.weight"] = torch::zeros({4, 64});
  try {
    load_lora_state(*model, tensors, "some/adapter");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("some/adapter"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing: model.layers.1.mlp.up_proj.lora_B.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected: model.layers.9.self_attn.q_proj.lora_A.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("wrong shape: model.layers.0.self_attn.q_proj.lora_A.weight"), std::string::npos) << msg;
  }
}

TEST(ModelLora, SettingsErrorsNameTheKey) {
  struct Case {
    LoraConfig settings;
    std::string key;
  };
  std::vector<Case> cases;
  LoraConfig l = all_targets();
  l.rank = -1;
  cases.push_back({l, "lora.rank"});
  l = all_targets();
  l.dropout = 1.0;
  cases.push_back({l, "lora.dropout"});
  l = all_targets();
  l.alpha = 0;
  cases.push_back({l, "lora.alpha"});
  l = all_targets();
  l.target_modules = {"q_proj", "w_proj"};
  cases.push_back({l, "lora.target_modules: unknown module 'w_proj'"});
  l = all_targets();
  l.target_modules = {"q_proj", "qkv_proj"};  // Phi-3's fused projection; this Llama has none
  cases.push_back({l, "lora.target_modules: this llama model has no projection 'qkv_proj'"});
  l = all_targets();
  l.target_modules = {};
  cases.push_back({l, "lora.target_modules"});
  for (const auto& c : cases) {
    CausalLM model = tiny_model();
    try {
      apply_lora(*model->model, c.settings, 0);
      ADD_FAILURE() << "expected ConfigError for " << c.key;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.key), std::string::npos) << e.what();
    }
    EXPECT_FALSE(has_lora(*model->model));
  }
}

TEST(ModelLora, PeftTensorNames) {
  EXPECT_EQ(io::peft_tensor_name("model.layers.0.self_attn.q_proj.lora_A.weight"),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(io::tensor_name_from_peft("base_model.model.model.layers.3.mlp.down_proj.lora_B.weight"),
            "model.layers.3.mlp.down_proj.lora_B.weight");
  EXPECT_THROW(io::tensor_name_from_peft("model.layers.0.self_attn.q_proj.lora_A.weight"), InputError);
  EXPECT_TRUE(io::is_lora_tensor("model.layers.0.mlp.up_proj.lora_B.weight"));
  EXPECT_FALSE(io::is_lora_tensor("model.layers.0.mlp.up_proj.weight"));
}

}  // namespace
}  // namespace ferry
