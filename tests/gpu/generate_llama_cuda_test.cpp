// The Llama model and generation on CUDA against the CPU: fp32 logits, bf16 logits (fused SDPA
// kernels, the RMSNorm kernel), and greedy generation token for token; also with Qwen3's q/k norms
// (the RMSNorm kernel over head_dim) and Mistral's sliding window. Skipped without a GPU.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/model/model_state.h"

namespace ferry {
namespace {

class ModelCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no CUDA device";
    config_.vocab_size = 211;
    config_.hidden_size = 64;
    config_.intermediate_size = 160;
    config_.num_hidden_layers = 3;
    config_.num_attention_heads = 4;
    config_.num_key_value_heads = 2;
    config_.head_dim = 16;
    config_.rope_scaling.type = RopeScalingType::llama3;
    config_.rope_scaling.factor = 8.0;
    config_.rope_scaling.original_max_position_embeddings = 64;
    cpu_ = CausalLM(config_);
    init_model_weights(*cpu_, config_, 0.2, 4);
    cpu_->eval();
    gpu_ = CausalLM(config_);
    load_state(*gpu_, state_of(*cpu_));
    gpu_->to(torch::kCUDA);
    gpu_->eval();
    batch_ = left_pad({{5, 17, 33, 2, 99, 100, 7}, {8, 9}, {120, 121, 122, 123}}, 0);
  }

  ModelShape config_;
  CausalLM cpu_{nullptr}, gpu_{nullptr};
  PromptBatch batch_;
};

double max_error_on_tokens(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  return ((a.cpu().to(torch::kFloat) - b.cpu().to(torch::kFloat)).abs() * mask.cpu().unsqueeze(-1)).max().item<double>();
}

TEST_F(ModelCuda, Fp32LogitsMatchCpu) {
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = cpu_(batch_.input_ids, batch_.attention_mask);
  const torch::Tensor got = gpu_(batch_.input_ids.cuda(), batch_.attention_mask.cuda());
  EXPECT_LE(max_error_on_tokens(got, expected, batch_.attention_mask), 1e-4);  // TF32 is off by default in libtorch
}

TEST_F(ModelCuda, Bf16LogitsAreCloseToFp32) {
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = cpu_(batch_.input_ids, batch_.attention_mask);
  gpu_->to(torch::kBFloat16);
  const torch::Tensor got = gpu_(batch_.input_ids.cuda(), batch_.attention_mask.cuda());
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_FALSE(got.isnan().any().item<bool>());
  EXPECT_LE(max_error_on_tokens(got, expected, batch_.attention_mask), 0.05 * expected.abs().max().item<double>());
}

TEST_F(ModelCuda, GreedyGenerationMatchesCpu) {
  const GenerateOptions options{.max_new_tokens = 16, .pad_token_id = 0};
  const GenerateResult cpu = generate(*cpu_, batch_.input_ids, batch_.attention_mask, options);
  const GenerateResult gpu = generate(*gpu_, batch_.input_ids.cuda(), batch_.attention_mask.cuda(), options);
  EXPECT_TRUE(torch::equal(gpu.tokens.cpu(), cpu.tokens)) << gpu.tokens << cpu.tokens;
  EXPECT_LE((gpu.logprobs.cpu() - cpu.logprobs).abs().max().item<double>(), 1e-4);
}

// The decode step replayed as CUDA graphs (one per batch-size bucket, src/generate/fixed_decode_step.h)
// against the same step launched kernel by kernel: rows stop at different steps (the stop ids),
// so the batch shrinks through several buckets; the same tokens, log-probs within 1e-5, and the
// CPU's tokens.
TEST_F(ModelCuda, CudaGraphDecodeMatchesEagerAndCpu) {
  const PromptBatch batch = left_pad({{5, 17, 33, 2, 99, 100, 7}, {8, 9}, {120, 121, 122, 123}, {8, 9}, {40}, {41, 42}}, 0);
  GenerateOptions options{.max_new_tokens = 24, .pad_token_id = 0};
  for (int64_t id = 0; id < 211; id += 13) options.stop_token_ids.push_back(id);
  options.cuda_graphs = true;
  const GenerateResult graphs = generate(*gpu_, batch.input_ids.cuda(), batch.attention_mask.cuda(), options);
  options.cuda_graphs = false;
  const GenerateResult eager = generate(*gpu_, batch.input_ids.cuda(), batch.attention_mask.cuda(), options);
  const GenerateResult cpu = generate(*cpu_, batch.input_ids, batch.attention_mask, options);
  EXPECT_TRUE(torch::equal(graphs.tokens.cpu(), eager.tokens.cpu())) << graphs.tokens << eager.tokens;
  EXPECT_LE((graphs.logprobs.cpu() - eager.logprobs.cpu()).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(torch::equal(graphs.tokens.cpu(), cpu.tokens)) << graphs.tokens << cpu.tokens;
  const torch::Tensor lengths = graphs.attention_mask.sum(1);
  const int64_t lengths_differ = (lengths != lengths[0]).any().item<bool>() ? 2 : 1;
  EXPECT_GE(lengths_differ, 2) << "the test needs rows that stop at different steps";
}

// Continuous batching on the GPU: 2 rows at a time, the others joining as rows stop (their keys
// copied into buffers a captured graph reads, the leading columns dropped when the cache needs
// room): graphs, eager and the CPU give the tokens of all rows at once.
TEST_F(ModelCuda, CudaGraphDecodeWithRowsJoiningMatchesAllAtOnce) {
  const PromptBatch batch = left_pad({{5, 17, 33, 2, 99, 100, 7}, {8, 9}, {120, 121, 122, 123}, {8, 9}, {40}, {41, 42}}, 0);
  GenerateOptions options{.max_new_tokens = 24, .pad_token_id = 0};
  for (int64_t id = 0; id < 211; id += 13) options.stop_token_ids.push_back(id);
  const GenerateResult all = generate(*cpu_, batch.input_ids, batch.attention_mask, options);
  options.max_rows = 2;
  for (bool graphs : {true, false}) {
    options.cuda_graphs = graphs;
    const GenerateResult joining = generate(*gpu_, batch.input_ids.cuda(), batch.attention_mask.cuda(), options);
    EXPECT_TRUE(torch::equal(joining.tokens.cpu(), all.tokens)) << "graphs " << graphs << joining.tokens << all.tokens;
  }
  const GenerateResult cpu = generate(*cpu_, batch.input_ids, batch.attention_mask, options);
  EXPECT_TRUE(torch::equal(cpu.tokens, all.tokens)) << cpu.tokens << all.tokens;
}

TEST_F(ModelCuda, SeededSamplingMatchesCpu) {
  const GenerateOptions options{.max_new_tokens = 10, .sampling = {.greedy = false, .temperature = 0.9, .top_k = 50},
                                .pad_token_id = 0, .seed = 3};
  const GenerateResult cpu = generate(*cpu_, batch_.input_ids, batch_.attention_mask, options);
  const GenerateResult gpu = generate(*gpu_, batch_.input_ids.cuda(), batch_.attention_mask.cuda(), options);
  // Draws happen on the CPU from the same generator, so only near-ties in probability could differ.
  EXPECT_TRUE(torch::equal(gpu.tokens.cpu(), cpu.tokens)) << gpu.tokens << cpu.tokens;
}

// Qwen3's q/k norms and a sliding window shorter than the sequences (the window mask through SDPA
// on CUDA, and through the KV cache): fp32 logits and greedy tokens equal the CPU's.
TEST_F(ModelCuda, QkNormsAndSlidingWindowMatchCpu) {
  ModelShape config = config_;
  config.qk_norm = QkNorm::per_head;
  config.head_dim = 32;
  config.sliding_window = 3;
  CausalLM cpu(config);
  init_model_weights(*cpu, config, 0.2, 6);
  cpu->eval();
  CausalLM gpu(config);
  load_state(*gpu, state_of(*cpu));
  gpu->to(torch::kCUDA);
  gpu->eval();
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor expected = cpu(batch_.input_ids, batch_.attention_mask);
    const torch::Tensor got = gpu(batch_.input_ids.cuda(), batch_.attention_mask.cuda());
    EXPECT_LE(max_error_on_tokens(got, expected, batch_.attention_mask), 1e-4);
  }
  const GenerateOptions options{.max_new_tokens = 12, .pad_token_id = 0};
  const GenerateResult on_cpu = generate(*cpu, batch_.input_ids, batch_.attention_mask, options);
  const GenerateResult on_gpu = generate(*gpu, batch_.input_ids.cuda(), batch_.attention_mask.cuda(), options);
  EXPECT_TRUE(torch::equal(on_gpu.tokens.cpu(), on_cpu.tokens)) << on_gpu.tokens << on_cpu.tokens;
}

}  // namespace
}  // namespace ferry
