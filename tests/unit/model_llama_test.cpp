// Llama model unit tests that need no files: parameter names, KV-cache decoding against the full
// forward, left-padding invariance, tied heads, score head, load_state error reporting; Qwen3's q/k
// norms (names, where they act) and Mistral's sliding window (against a per-query loop).
// Agreement with transformers itself is checked in tests/parity/model_llama_parity_test.cpp.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/error.h"
#include "src/model/kv_cache.h"
#include "src/model/model_heads.h"
#include "src/model/model_state.h"
#include "tests/support/tiny_llama_config.h"
#include "src/model/family/model_tensors.h"

namespace ferry {
namespace {

ModelShape tiny_config() { return test_support::tiny_llama_config(101, 96); }

CausalLM tiny_model(const ModelShape& c, uint64_t seed = 1) {
  torch::manual_seed(static_cast<int64_t>(seed));  // for the random inputs the tests draw
  CausalLM model(c);
  init_model_weights(*model, c, 0.2, seed);  // larger than 0.02 so that logits differ visibly
  model->eval();
  return model;
}

TEST(ModelLlama, ParameterNamesMatchHuggingFace) {
  ModelShape c = tiny_config();
  c.attention_bias = true;
  c.attention_output_bias = true;
  c.mlp_bias = true;
  CausalLM model(c);
  const auto names = model->named_parameters().keys();
  const std::set<std::string> got(names.begin(), names.end());
  for (const char* expected :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.bias",
        "model.layers.1.self_attn.k_proj.bias", "model.layers.1.self_attn.v_proj.weight",
        "model.layers.1.self_attn.o_proj.bias", "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.bias",
        "model.layers.1.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.1.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"}) {
    EXPECT_TRUE(got.count(expected)) << expected;
  }
  EXPECT_EQ(got.size(), 3u + 2u * (7u + 4u + 3u + 2u));
  EXPECT_EQ(model->named_buffers().size(), 0u);  // RoPE frequencies are not state
  CausalLM plain(tiny_config());
  int64_t count = 0;
  for (const auto& p : plain->parameters()) count += p.numel();
  EXPECT_EQ(count, parameter_count(tiny_config()));
}

// Qwen3: self_attn.q_norm / k_norm of head_dim, initialised to 1, trained like any parameter.
TEST(ModelLlama, QkNormsAreOrdinaryParametersOfHeadDim) {
  ModelShape c = tiny_config();
  c.qk_norm = QkNorm::per_head;
  c.head_dim = 32;  // != hidden / heads
  CausalLM model = tiny_model(c);
  const auto parameters = model->named_parameters();
  for (const char* name : {"model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight"}) {
    ASSERT_TRUE(parameters.contains(name)) << name;
    EXPECT_EQ(parameters[name].sizes(), torch::IntArrayRef({32})) << name;
    EXPECT_TRUE(torch::equal(parameters[name], torch::ones({32}))) << name;
  }
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, parameter_count(c));
  model->train();
  model(torch::randint(0, c.vocab_size, {2, 5}, torch::kLong)).sum().backward();
  EXPECT_GT(parameters["model.layers.0.self_attn.q_norm.weight"].grad().abs().sum().item<double>(), 0.0);
  EXPECT_GT(parameters["model.layers.1.self_attn.k_norm.weight"].grad().abs().sum().item<double>(), 0.0);
}

// Mistral's sliding window: with one layer, the logits at position i are those of the window's
// tokens alone (i - w + 1 .. i, at their positions), a per-query loop; a window as long as the
// sequence changes nothing.
TEST(ModelLlama, SlidingWindowSeesOnlyTheLastWindowKeys) {
  torch::NoGradGuard no_grad;
  ModelShape c = tiny_config();
  c.num_hidden_layers = 1;
  c.sliding_window = 4;
  CausalLM model = tiny_model(c, 11);
  ModelShape full_config = c;
  full_config.sliding_window = 0;
  CausalLM full = tiny_model(full_config, 11);
  const torch::Tensor ids = torch::randint(1, c.vocab_size, {2, 10}, torch::kLong);
  const torch::Tensor got = model(ids);  // (2, 10, V)
  for (int64_t i = 0; i < 10; ++i) {
    const int64_t first = std::max<int64_t>(0, i - c.sliding_window + 1);
    const torch::Tensor positions = torch::arange(first, i + 1, torch::kLong).unsqueeze(0).expand({2, i + 1 - first});
    const torch::Tensor alone = full(ids.narrow(1, first, i + 1 - first), torch::Tensor(), positions).select(1, -1);
    EXPECT_LT((got.select(1, i) - alone).abs().max().item<double>(), 1e-5) << "position " << i;
  }
  EXPECT_GT((got - full(ids)).abs().max().item<double>(), 1e-3);  // the window did mask something
  c.sliding_window = 10;
  CausalLM wide = tiny_model(c, 11);
  EXPECT_LT((wide(ids) - full(ids)).abs().max().item<double>(), 1e-6);
}

// Decoding with a KV cache past the window (and through left padding) gives the full forward's
// logits under the same window.
TEST(ModelLlama, SlidingWindowKvCacheDecodingMatchesFullForward) {
  torch::NoGradGuard no_grad;
  ModelShape c = tiny_config();
  c.sliding_window = 3;
  CausalLM model = tiny_model(c, 13);
  const torch::Tensor ids =
      torch::randint(1, c.vocab_size, {2, 11}, torch::kLong).index_put_({0, torch::indexing::Slice(0, 2)}, 0);
  torch::Tensor mask = torch::ones({2, 11}, torch::kLong);
  mask.index_put_({0, torch::indexing::Slice(0, 2)}, 0);
  const torch::Tensor full = model(ids, mask);
  KvCache cache(c, 2, 11, torch::kFloat, torch::kCPU);
  const torch::Tensor first = model(ids.narrow(1, 0, 5), mask.narrow(1, 0, 5), torch::Tensor(), &cache);
  EXPECT_LT((first.narrow(1, 2, 3) - full.narrow(1, 2, 3)).abs().max().item<double>(), 1e-5);
  for (int64_t t = 5; t < 11; ++t) {
    const torch::Tensor step = model(ids.narrow(1, t, 1), mask.narrow(1, 0, t + 1), torch::Tensor(), &cache);
    EXPECT_LT((step.squeeze(1) - full.select(1, t)).abs().max().item<double>(), 1e-5) << "position " << t;
  }
}


TEST(ModelLlama, KvCacheDecodingMatchesFullForward) {
  torch::NoGradGuard no_grad;
  const ModelShape c = tiny_config();
  CausalLM model = tiny_model(c);
  const int64_t pad = 0;
  // Row 0 left-padded by 3, row 1 unpadded; 5 prompt columns then 6 decoded tokens.
  const torch::Tensor ids = torch::randint(1, c.vocab_size, {2, 11}, torch::kLong).index_put_({0, torch::indexing::Slice(0, 3)}, pad);
  torch::Tensor mask = torch::ones({2, 11}, torch::kLong);
  mask.index_put_({0, torch::indexing::Slice(0, 3)}, 0);
  const torch::Tensor full = model(ids, mask);  // (2, 11, V)

  KvCache cache(c, 2, 11, torch::kFloat, torch::kCPU);
  const int64_t prompt = 5;
  const torch::Tensor first = model(ids.narrow(1, 0, prompt), mask.narrow(1, 0, prompt), torch::Tensor(), &cache);
  EXPECT_EQ(cache.length(), prompt);
  EXPECT_LT((first.narrow(1, 3, 2) - full.narrow(1, 3, 2)).abs().max().item<double>(), 1e-5);
  EXPECT_LT((first[1] - full[1].narrow(0, 0, prompt)).abs().max().item<double>(), 1e-5);
  for (int64_t t = prompt; t < 11; ++t) {
    const torch::Tensor step = model(ids.narrow(1, t, 1), mask.narrow(1, 0, t + 1), torch::Tensor(), &cache);  // (2, 1, V)
    EXPECT_LT((step.squeeze(1) - full.select(1, t)).abs().max().item<double>(), 1e-5) << "position " << t;
  }
  EXPECT_THROW(model(ids.narrow(1, 0, 1), mask, torch::Tensor(), &cache), InputError);  // mask no longer covers the cache
}

TEST(ModelLlama, LeftPaddingDoesNotChangeLogits) {
  torch::NoGradGuard no_grad;
  const ModelShape c = tiny_config();
  CausalLM model = tiny_model(c, 7);
  const torch::Tensor alone = torch::randint(1, c.vocab_size, {1, 6}, torch::kLong);
  const torch::Tensor padded = torch::cat({torch::zeros({1, 4}, torch::kLong), alone}, 1);
  const torch::Tensor mask = torch::cat({torch::zeros({1, 4}, torch::kLong), torch::ones({1, 6}, torch::kLong)}, 1);
  const torch::Tensor expected = model(alone);
  const torch::Tensor got = model(padded, mask).narrow(1, 4, 6);
  EXPECT_LT((got - expected).abs().max().item<double>(), 1e-5);
  EXPECT_FALSE(model(padded, mask).isnan().any().item<bool>());  // padding queries stay finite
}

TEST(ModelLlama, FullMaskKeepsPackedSamplesApart) {
  torch::NoGradGuard no_grad;
  const ModelShape c = tiny_config();
  CausalLM model = tiny_model(c, 9);
  const torch::Tensor a = torch::randint(1, c.vocab_size, {1, 4}, torch::kLong);
  const torch::Tensor b = torch::randint(1, c.vocab_size, {1, 3}, torch::kLong);
  const torch::Tensor packed = torch::cat({a, b}, 1);  // (1, 7): two samples in one row
  const torch::Tensor segment = torch::tensor({1, 1, 1, 1, 2, 2, 2}, torch::kLong);
  const torch::Tensor causal = torch::ones({7, 7}, torch::kBool).tril();
  const torch::Tensor same = segment.unsqueeze(0) == segment.unsqueeze(1);
  const torch::Tensor mask = (causal & same).view({1, 1, 7, 7});
  const torch::Tensor positions = torch::tensor({0, 1, 2, 3, 0, 1, 2}, torch::kLong).unsqueeze(0);
  const torch::Tensor got = model(packed, mask, positions);
  EXPECT_LT((got.narrow(1, 0, 4) - model(a)).abs().max().item<double>(), 1e-5);
  EXPECT_LT((got.narrow(1, 4, 3) - model(b)).abs().max().item<double>(), 1e-5);
  EXPECT_THROW(model(packed, mask.to(torch::kLong), positions), InputError);
}

TEST(ModelLlama, TiedHeadUsesTheEmbedding) {
  torch::NoGradGuard no_grad;
  ModelShape c = tiny_config();
  c.tie_word_embeddings = true;
  CausalLM model = tiny_model(c);
  EXPECT_TRUE(model->tied());
  EXPECT_FALSE(model->named_parameters().contains("lm_head.weight"));
  const torch::Tensor ids = torch::randint(0, c.vocab_size, {2, 5}, torch::kLong);
  const torch::Tensor expected = torch::matmul(model->model(ids), model->model->embed_tokens->weight.t());
  EXPECT_LT((model(ids) - expected).abs().max().item<double>(), 1e-5);
  // A checkpoint that still carries lm_head.weight loads into the tied model.
  io::TensorMap state = state_of(*model);
  state["lm_head.weight"] = model->model->embed_tokens->weight.clone();
  EXPECT_NO_THROW(load_state(*model, state));
}

TEST(ModelLlama, LoadStateReportsEveryProblemAtOnce) {
  const ModelShape c = tiny_config();
  CausalLM source = tiny_model(c, 3);
  CausalLM target(c);
  io::TensorMap state;
  for (const auto& [name, tensor] : state_of(*source)) state[name] = tensor.clone();
  state.erase("model.layers.1.mlp.up_proj.weight");
  state["model.layers.7.mlp.up_proj.weight"] = torch::zeros({2});
  state["model.norm.weight"] = torch::ones({3});
  state["model.rotary_emb.inv_freq"] = torch::ones({8});  // ignored, as transformers does
  try {
    load_state(*target, state, {.source = "some/model"});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("some/model"), std::string::npos) << message;
    EXPECT_NE(message.find("missing (1): model.layers.1.mlp.up_proj.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected (1): model.layers.7.mlp.up_proj.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("shape mismatch (1): model.norm.weight"), std::string::npos) << message;
    EXPECT_EQ(message.find("inv_freq"), std::string::npos) << message;
  }
  // Nothing was copied: the target still differs from the source.
  EXPECT_FALSE(torch::equal(target->model->embed_tokens->weight, source->model->embed_tokens->weight));

  // A correct map loads, converting dtype (bf16 checkpoint into an fp32 model).
  io::TensorMap good;
  for (const auto& [name, tensor] : state_of(*source)) good[name] = tensor.to(torch::kBFloat16);
  load_state(*target, good);
  EXPECT_TRUE(torch::equal(target->model->norm->weight, source->model->norm->weight.to(torch::kBFloat16).to(torch::kFloat)));
}

TEST(ModelLlama, BadInputsAreInputErrors) {
  torch::NoGradGuard no_grad;
  const ModelShape c = tiny_config();
  CausalLM model = tiny_model(c);
  EXPECT_THROW(model(torch::full({1, 3}, c.vocab_size, torch::kLong)), InputError);
  EXPECT_THROW(model(torch::full({1, 3}, -1, torch::kLong)), InputError);
  EXPECT_THROW(model(torch::ones({3}, torch::kLong)), InputError);
  EXPECT_THROW(model(torch::ones({1, 3}, torch::kFloat)), InputError);
  EXPECT_THROW(model(torch::ones({2, 3}, torch::kLong), torch::ones({2, 4}, torch::kLong)), InputError);
  ModelShape bad = c;
  bad.num_key_value_heads = 3;
  EXPECT_THROW(CausalLM{bad}, ConfigError);
}

TEST(ModelLlama, ScoreHeadTakesTheLastToken) {
  torch::NoGradGuard no_grad;
  const ModelShape c = tiny_config();
  ScoreModel scorer(c);
  init_model_weights(*scorer, c, 0.2, 5);
  EXPECT_TRUE(scorer->named_parameters().contains("score.weight"));
  const torch::Tensor ids = torch::randint(1, c.vocab_size, {2, 6}, torch::kLong);
  const torch::Tensor mask = torch::tensor({1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}, torch::kLong).view({2, 6});
  const torch::Tensor values = scorer(ids, mask);  // (2, 6)
  ASSERT_EQ(values.sizes(), (std::vector<int64_t>{2, 6}));
  const torch::Tensor last = last_token_values(values, mask);
  EXPECT_EQ(last[0].item<float>(), values[0][3].item<float>());  // right padding
  EXPECT_EQ(last[1].item<float>(), values[1][5].item<float>());  // left padding
  EXPECT_THROW(last_token_values(values, torch::zeros({2, 6}, torch::kLong)), InputError);
}

TEST(ModelLlama, HalfPrecisionForwardIsCloseToFloat) {
  torch::NoGradGuard no_grad;
  const ModelShape c = tiny_config();
  CausalLM model = tiny_model(c);
  const torch::Tensor ids = torch::randint(0, c.vocab_size, {2, 7}, torch::kLong);
  const torch::Tensor reference = model(ids);
  model->to(torch::kBFloat16);
  const torch::Tensor low = model(ids);
  EXPECT_EQ(low.scalar_type(), torch::kBFloat16);
  // bf16 keeps 8 mantissa bits: errors of ~1% of the logit scale after two layers.
  EXPECT_LT((low.to(torch::kFloat) - reference).abs().max().item<double>(), 0.05 * reference.abs().max().item<double>());
}

TEST(ModelLlama, GradientsReachEveryParameter) {
  const ModelShape c = tiny_config();
  CausalLM model = tiny_model(c);
  model->train();
  const torch::Tensor ids = torch::randint(0, c.vocab_size, {2, 5}, torch::kLong);
  model(ids).sum().backward();
  for (const auto& item : model->named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
  }
}

}  // namespace
}  // namespace ferry
