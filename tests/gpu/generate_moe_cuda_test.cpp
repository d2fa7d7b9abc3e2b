// A Mixture of Experts (a tiny Qwen3-MoE: 8 experts, top-2, a dense layer between sparse ones) on
// CUDA against the CPU: fp32 logits, the training loss with the load-balancing term and every
// gradient, and greedy generation token for token (decode steps run eagerly: no CUDA graphs for
// MoE). Skipped without a GPU.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/model/model_state.h"
#include "src/model/router_load.h"

namespace ferry {
namespace {

class MoeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no CUDA device";
    config_.model_type = "qwen3_moe";
    config_.vocab_size = 211;
    config_.hidden_size = 64;
    config_.intermediate_size = 96;
    config_.num_hidden_layers = 3;
    config_.num_attention_heads = 4;
    config_.num_key_value_heads = 2;
    config_.head_dim = 16;
    config_.qk_norm = QkNorm::per_head;
    config_.moe.num_experts = 8;
    config_.moe.experts_per_token = 2;
    config_.moe.expert_intermediate_size = 32;
    config_.moe.normalize_top_k = true;
    config_.moe.sparse_layers = {true, false, true};
    config_.moe.router_aux_loss_coef = 0.02;
    cpu_ = CausalLM(config_);
    init_model_weights(*cpu_, config_, 0.2, 4);
    cpu_->eval();
    gpu_ = CausalLM(config_);
    load_state(*gpu_, state_of(*cpu_));
    gpu_->to(torch::kCUDA);
    gpu_->eval();
    batch_ = left_pad({{5, 17, 33, 2, 99, 100, 7}, {8, 9}, {120, 121, 122, 123}}, 0);
  }

  // Mean next-token cross-entropy + coef x aux, backward; returns the loss.
  double train_step(CausalLM& model, const c10::Device& device) {
    model->train();
    const torch::Tensor ids = batch_.input_ids.to(device), mask = batch_.attention_mask.to(device);
    auto load = std::make_shared<RouterLoad>(8, 2, 0.02, mask);
    model->model->set_router_load(load);
    const torch::Tensor logits = model(ids, mask);
    model->model->set_router_load(nullptr);
    const torch::Tensor labels = ids.masked_fill(mask == 0, -100);
    const torch::Tensor ce = torch::nn::functional::cross_entropy(
        logits.narrow(1, 0, logits.size(1) - 1).reshape({-1, logits.size(-1)}),
        labels.narrow(1, 1, labels.size(1) - 1).reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    const torch::Tensor loss = ce + load->loss_term(device);
    loss.backward();
    model->eval();
    return loss.item<double>();
  }

  ModelShape config_;
  CausalLM cpu_{nullptr}, gpu_{nullptr};
  PromptBatch batch_;
};

TEST_F(MoeCuda, Fp32LogitsMatchCpu) {
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = cpu_(batch_.input_ids, batch_.attention_mask);
  const torch::Tensor got = gpu_(batch_.input_ids.cuda(), batch_.attention_mask.cuda());
  const torch::Tensor keep = batch_.attention_mask.unsqueeze(-1);
  EXPECT_LE(((got.cpu() - expected).abs() * keep).max().item<double>(), 1e-4);
}

TEST_F(MoeCuda, TrainingLossAndGradientsMatchCpu) {
  const double cpu_loss = train_step(cpu_, torch::kCPU);
  const double gpu_loss = train_step(gpu_, torch::kCUDA);
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-4);
  const auto gpu_params = gpu_->named_parameters();
  double worst = 0;
  for (const auto& item : cpu_->named_parameters()) {
    const torch::Tensor& want = item.value().grad();
    const torch::Tensor& got = gpu_params[item.key()].grad();
    ASSERT_EQ(want.defined(), got.defined()) << item.key();
    if (!want.defined()) continue;
    worst = std::max(worst, (got.cpu() - want).abs().max().item<double>());
  }
  EXPECT_LE(worst, 1e-4);
}

TEST_F(MoeCuda, GreedyGenerationMatchesCpu) {
  GenerateOptions options{.max_new_tokens = 12, .pad_token_id = 0};
  const GenerateResult cpu = generate(*cpu_, batch_.input_ids, batch_.attention_mask, options);
  for (const bool graphs : {true, false}) {  // graphs asked for: MoE decodes eagerly anyway
    options.cuda_graphs = graphs;
    const GenerateResult gpu = generate(*gpu_, batch_.input_ids.cuda(), batch_.attention_mask.cuda(), options);
    EXPECT_TRUE(torch::equal(gpu.tokens.cpu(), cpu.tokens)) << gpu.tokens << cpu.tokens;
  }
}

}  // namespace
}  // namespace ferry
