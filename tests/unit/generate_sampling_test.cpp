// Generation unit tests: the logits warpers on hand-made distributions, greedy/top-k=1 agreement,
// seeded reproducibility, and the cached decode loop against a plain full-forward loop.
// Token-for-token agreement with transformers' generate is in tests/parity/generate_llama_parity_test.cpp.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/sampling.h"
#include "src/model/model_state.h"
#include "tests/support/naive_sampling.h"

namespace ferry {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

torch::Tensor log_of(std::vector<float> probs) { return torch::tensor(probs).log().unsqueeze(0); }

std::vector<bool> kept(const torch::Tensor& warped) {
  std::vector<bool> out;
  for (int64_t i = 0; i < warped.size(1); ++i) out.push_back(std::isfinite(warped[0][i].item<float>()));
  return out;
}

TEST(GenerateSampling, TopKKeepsTheKLargestAndTies) {
  const torch::Tensor logits = torch::tensor({1.0f, 4.0f, 3.0f, 2.0f, 3.0f}).unsqueeze(0);
  EXPECT_EQ(kept(top_k_filter(logits, 2)), (std::vector<bool>{false, true, true, false, true}));  // tie at 3 kept
  EXPECT_EQ(kept(top_k_filter(logits, 1)), (std::vector<bool>{false, true, false, false, false}));
  EXPECT_TRUE(torch::equal(top_k_filter(logits, 0), logits));
  EXPECT_TRUE(torch::equal(top_k_filter(logits, 9), logits));
  EXPECT_EQ(top_k_filter(logits, 1)[0][0].item<float>(), -kInf);
}

TEST(GenerateSampling, TopPKeepsTheNucleus) {
  // probabilities 0.1 0.2 0.3 0.4 (in shuffled order): ascending cumulative 0.1 0.3 0.6 1.0
  const torch::Tensor logits = log_of({0.3f, 0.1f, 0.4f, 0.2f});
  EXPECT_EQ(kept(top_p_filter(logits, 0.5)), (std::vector<bool>{true, false, true, false}));   // drop cum <= 0.5
  EXPECT_EQ(kept(top_p_filter(logits, 0.35)), (std::vector<bool>{false, false, true, false}));  // drop cum <= 0.65
  EXPECT_EQ(kept(top_p_filter(logits, 0.85)), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(kept(top_p_filter(logits, 1e-6)), (std::vector<bool>{false, false, true, false}));  // keeps one
  EXPECT_TRUE(torch::equal(top_p_filter(logits, 1.0), logits));
}

TEST(GenerateSampling, WarpersRunTemperatureThenTopKThenTopP) {
  // Temperature 0.5 squares the probabilities: 0.01 0.04 0.09 0.16 -> 0.033 0.133 0.3 0.533, so
  // top-p 0.5 keeps only the largest (it would keep two at temperature 1).
  const torch::Tensor logits = log_of({0.1f, 0.2f, 0.3f, 0.4f});
  SamplingOptions options{.greedy = false, .temperature = 0.5, .top_k = 0, .top_p = 0.5};
  EXPECT_EQ(kept(warp_logits(logits, options)), (std::vector<bool>{false, false, false, true}));
  options.temperature = 1.0;
  EXPECT_EQ(kept(warp_logits(logits, options)), (std::vector<bool>{false, false, true, true}));
  // top-k before top-p: after keeping 2 tokens, 0.3/0.7 and 0.4/0.7; top-p 0.5 keeps the 0.57 only.
  options.top_k = 2;
  EXPECT_EQ(kept(warp_logits(logits, options)), (std::vector<bool>{false, false, false, true}));
  const torch::Tensor scaled = warp_logits(logits, {.greedy = false, .temperature = 2.0});
  EXPECT_TRUE(torch::allclose(scaled, logits / 2.0));
}

TEST(GenerateSampling, TopKOneIsGreedy) {
  torch::manual_seed(0);
  const torch::Tensor logits = torch::randn({16, 50});
  at::Generator generator = make_sampling_generator(3);
  const torch::Tensor sampled = choose_next_tokens(logits, {.greedy = false, .temperature = 0.7, .top_k = 1}, generator);
  EXPECT_TRUE(torch::equal(sampled, logits.argmax(-1)));
}

TEST(GenerateSampling, SeededSamplingRepeats) {
  torch::manual_seed(0);
  const torch::Tensor logits = torch::randn({64, 50}) * 0.1;  // nearly uniform: many possible outcomes
  const SamplingOptions options{.greedy = false, .temperature = 1.0, .top_k = 40, .top_p = 0.95};
  at::Generator a = make_sampling_generator(11), b = make_sampling_generator(11), c = make_sampling_generator(12);
  const torch::Tensor first = choose_next_tokens(logits, options, a);
  EXPECT_TRUE(torch::equal(first, choose_next_tokens(logits, options, b)));
  EXPECT_FALSE(torch::equal(first, choose_next_tokens(logits, options, c)));
  EXPECT_FALSE(torch::equal(first, choose_next_tokens(logits, options, a)));  // the generator advances
}

// Sampled tokens follow softmax(warped logits): 40 000 draws from 8 tokens at temperature 0.7 with
// top-k 6 and top-p 0.97, counted against the probabilities computed here in double (a chi-square
// statistic, 5 degrees of freedom at most; 30 is p < 1e-5 for a correct sampler). The two tokens
// top-k drops, and any top-p drops, are never drawn.
TEST(GenerateSampling, SampledTokensFollowTheWarpedDistribution) {
  const std::vector<double> raw = {0.3, -1.2, 2.0, 0.9, -0.4, 1.4, -2.5, 0.1};
  const SamplingOptions options{.greedy = false, .temperature = 0.7, .top_k = 6, .top_p = 0.97};
  // Expected: temperature, the 6 largest, then the smallest set holding >= 0.97 of what is left.
  std::vector<double> p(raw.size());
  std::vector<size_t> order(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return raw[a] > raw[b]; });
  double z = 0;
  for (size_t r = 0; r < 6; ++r) z += std::exp(raw[order[r]] / 0.7);
  double held = 0;
  for (size_t r = 0; r < 6 && held < 0.97; ++r) {
    p[order[r]] = std::exp(raw[order[r]] / 0.7) / z;
    held += p[order[r]];
  }
  for (double& x : p) x /= held;
  const int64_t rows = 4000, rounds = 10;
  const torch::Tensor logits = torch::tensor(std::vector<float>(raw.begin(), raw.end())).unsqueeze(0).expand({rows, 8});
  at::Generator generator = make_sampling_generator(5);
  std::vector<int64_t> counts(raw.size(), 0);
  for (int64_t round = 0; round < rounds; ++round) {
    const torch::Tensor tokens = choose_next_tokens(logits, options, generator);
    for (int64_t i = 0; i < rows; ++i) ++counts[static_cast<size_t>(tokens[i].item<int64_t>())];
  }
  double chi2 = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = p[i] * static_cast<double>(rows * rounds);
    chi2 += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
  }
  EXPECT_LT(chi2, 30.0);
  EXPECT_EQ(counts[1] + counts[6], 0);  // outside the top 6
}

// The inverse-CDF pick at its edges, against the plain loop: u = 0 takes the first token with
// probability > 0, u just below 1 the last such token (never a zero-probability token after it),
// unnormalised rows pick as their normalised selves, and a row of NaN is a UserError, not a token.
TEST(GenerateSampling, InverseCdfPicksTokensOfPositiveProbabilityOnly) {
  const torch::Tensor probs = torch::tensor({0.0f, 0.25f, 0.0f, 0.5f, 0.25f, 0.0f}).unsqueeze(0);
  const double below_one = std::nextafter(1.0, 0.0);
  for (double u : {0.0, 0.1, 0.2499, 0.25, 0.5, 0.7499, 0.75, 0.9, below_one}) {
    const int64_t token = sample_by_inverse_cdf(probs, torch::tensor({u}, torch::kDouble))[0].item<int64_t>();
    EXPECT_EQ(token, test_support::naive_inverse_cdf_sample(probs[0], u)) << "u = " << u;
    EXPECT_GT(probs[0][token].item<float>(), 0.0f) << "u = " << u;
  }
  EXPECT_EQ(sample_by_inverse_cdf(probs, torch::tensor({0.0}, torch::kDouble))[0].item<int64_t>(), 1);
  EXPECT_EQ(sample_by_inverse_cdf(probs, torch::tensor({below_one}, torch::kDouble))[0].item<int64_t>(), 4);
  const torch::Tensor rows = torch::cat({probs, probs * 8.0f});
  EXPECT_TRUE(torch::equal(sample_by_inverse_cdf(rows, torch::tensor({0.6, 0.6}, torch::kDouble)),
                           torch::tensor({3, 3}, torch::kLong)));
  const torch::Tensor broken = torch::cat({probs, torch::full({1, 6}, std::nanf(""))});
  EXPECT_THROW(sample_by_inverse_cdf(broken, torch::tensor({0.5, 0.5}, torch::kDouble)), UserError);
  at::Generator generator = make_sampling_generator(1);
  EXPECT_THROW(choose_next_tokens(torch::full({2, 6}, std::nanf("")), {.greedy = false}, generator), UserError);
}

TEST(GenerateSampling, BadOptionsAreUserErrors) {
  EXPECT_THROW(check_sampling_options({.greedy = false, .temperature = 0.0}), UserError);
  EXPECT_THROW(check_sampling_options({.greedy = false, .top_k = -1}), UserError);
  EXPECT_THROW(check_sampling_options({.greedy = false, .top_p = 0.0}), UserError);
  EXPECT_THROW(check_sampling_options({.greedy = false, .top_p = 1.5}), UserError);
  EXPECT_NO_THROW(check_sampling_options({.greedy = true, .temperature = 0.0}));
  EXPECT_THROW(left_pad({}, 0), InputError);
  EXPECT_THROW(left_pad({{1, 2}, {}}, 0), InputError);
}

TEST(GenerateSampling, LeftPadPutsPaddingFirst) {
  const PromptBatch batch = left_pad({{5, 6, 7}, {8}}, 0);
  EXPECT_TRUE(torch::equal(batch.input_ids, torch::tensor({5, 6, 7, 0, 0, 8}, torch::kLong).view({2, 3})));
  EXPECT_TRUE(torch::equal(batch.attention_mask, torch::tensor({1, 1, 1, 0, 0, 1}, torch::kLong).view({2, 3})));
}

class GenerateLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.vocab_size = 53;
    config_.hidden_size = 64;
    config_.intermediate_size = 96;
    config_.num_hidden_layers = 2;
    config_.num_attention_heads = 4;
    config_.num_key_value_heads = 2;
    config_.head_dim = 16;
    model_ = CausalLM(config_);
    init_model_weights(*model_, config_, 0.3, 2);
    model_->eval();
    batch_ = left_pad({{3, 9, 14, 20, 7}, {11, 4}, {30, 31, 32}}, 0);
  }

  // Greedy decoding without a cache: a full forward over the whole sequence at every step.
  torch::Tensor plain_greedy(int64_t steps, torch::Tensor* logprobs) {
    torch::NoGradGuard no_grad;
    torch::Tensor ids = batch_.input_ids, mask = batch_.attention_mask;
    std::vector<torch::Tensor> chosen_logprobs;
    for (int64_t i = 0; i < steps; ++i) {
      const torch::Tensor logits = model_(ids, mask).select(1, -1);  // (B, V)
      const torch::Tensor next = logits.argmax(-1);
      chosen_logprobs.push_back(logits.log_softmax(-1).gather(1, next.unsqueeze(1)).squeeze(1));
      ids = torch::cat({ids, next.unsqueeze(1)}, 1);
      mask = torch::cat({mask, torch::ones({ids.size(0), 1}, torch::kLong)}, 1);
    }
    *logprobs = torch::stack(chosen_logprobs, 1);
    return ids;
  }

  ModelShape config_;
  CausalLM model_{nullptr};
  PromptBatch batch_;
};

TEST_F(GenerateLoop, CachedGreedyMatchesFullForwardLoop) {
  torch::Tensor expected_logprobs;
  const torch::Tensor expected = plain_greedy(8, &expected_logprobs);
  const GenerateResult result = generate(*model_, batch_.input_ids, batch_.attention_mask, {.max_new_tokens = 8});
  EXPECT_TRUE(torch::equal(result.tokens, expected)) << result.tokens << expected;
  EXPECT_LT((result.logprobs - expected_logprobs).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(result.prompt_length, 5);
  EXPECT_TRUE(torch::equal(result.attention_mask.narrow(1, 5, 8), torch::ones({3, 8}, torch::kLong)));
}

TEST_F(GenerateLoop, RowsStopAtEosAndThenPad) {
  torch::Tensor unused;
  const torch::Tensor free_run = plain_greedy(6, &unused);
  const int64_t eos = free_run[1][5 + 2].item<int64_t>();  // row 1's third new token
  GenerateOptions options{.max_new_tokens = 6, .eos_token_ids = {eos}, .pad_token_id = 52};
  const GenerateResult result = generate(*model_, batch_.input_ids, batch_.attention_mask, options);
  for (int64_t row = 0; row < 3; ++row) {
    bool stopped = false;
    for (int64_t t = 0; t < result.tokens.size(1) - 5; ++t) {
      const int64_t token = result.tokens[row][5 + t].item<int64_t>();
      if (stopped) {
        EXPECT_EQ(token, 52) << "row " << row << " step " << t;
        EXPECT_EQ(result.attention_mask[row][5 + t].item<int64_t>(), 0);
        EXPECT_EQ(result.logprobs[row][t].item<float>(), 0.0f);
      } else {
        EXPECT_EQ(token, free_run[row][5 + t].item<int64_t>()) << "row " << row << " step " << t;
        EXPECT_EQ(result.attention_mask[row][5 + t].item<int64_t>(), 1);
      }
      stopped = stopped || token == eos;
    }
  }
  EXPECT_EQ(result.tokens[1][5 + 3].item<int64_t>(), 52);
}

TEST_F(GenerateLoop, StopsEarlyWhenEveryRowStopped) {
  torch::Tensor unused;
  const torch::Tensor free_run = plain_greedy(1, &unused);
  GenerateOptions options{.max_new_tokens = 10, .stop_token_ids = {}};
  for (int64_t row = 0; row < 3; ++row) options.stop_token_ids.push_back(free_run[row][5].item<int64_t>());
  const GenerateResult result = generate(*model_, batch_.input_ids, batch_.attention_mask, options);
  EXPECT_EQ(result.tokens.size(1), 6);
  EXPECT_EQ(result.logprobs.size(1), 1);
}

TEST_F(GenerateLoop, TopKOneSamplingEqualsGreedyAndSeedsRepeat) {
  const GenerateResult greedy = generate(*model_, batch_.input_ids, batch_.attention_mask, {.max_new_tokens = 6});
  GenerateOptions top1{.max_new_tokens = 6, .sampling = {.greedy = false, .temperature = 0.8, .top_k = 1}, .seed = 5};
  EXPECT_TRUE(torch::equal(generate(*model_, batch_.input_ids, batch_.attention_mask, top1).tokens, greedy.tokens));

  GenerateOptions sample{.max_new_tokens = 12, .sampling = {.greedy = false, .temperature = 1.5, .top_p = 0.99}, .seed = 5};
  const GenerateResult a = generate(*model_, batch_.input_ids, batch_.attention_mask, sample);
  const GenerateResult b = generate(*model_, batch_.input_ids, batch_.attention_mask, sample);
  EXPECT_TRUE(torch::equal(a.tokens, b.tokens));
  EXPECT_TRUE(torch::equal(a.logprobs, b.logprobs));
  sample.seed = 6;
  EXPECT_FALSE(torch::equal(generate(*model_, batch_.input_ids, batch_.attention_mask, sample).tokens, a.tokens));
  // Sampled log-probs are those of softmax(logits / temperature) at the chosen tokens.
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model_(a.tokens, a.attention_mask).narrow(1, 4, 12).to(torch::kFloat);  // predicts new tokens
  const torch::Tensor expected = (logits / 1.5).log_softmax(-1).gather(2, a.tokens.narrow(1, 5, 12).unsqueeze(2)).squeeze(2);
  EXPECT_LT((a.logprobs - expected).abs().max().item<double>(), 1e-4);
}

TEST_F(GenerateLoop, BadRequestsAreUserErrors) {
  EXPECT_THROW(generate(*model_, batch_.input_ids, batch_.attention_mask, {.max_new_tokens = 0}), UserError);
  EXPECT_THROW(generate(*model_, batch_.input_ids, torch::zeros_like(batch_.attention_mask), {.max_new_tokens = 2}),
               InputError);
  EXPECT_THROW(generate(*model_, torch::full({1, 2}, 99, torch::kLong), torch::Tensor(), {.max_new_tokens = 2}), InputError);
  // Past the model's positions: a clear error before any memory is taken, not a huge KV cache.
  try {
    generate(*model_, batch_.input_ids, batch_.attention_mask, {.max_new_tokens = 1'000'000'000});
    ADD_FAILURE() << "no error for max_new_tokens beyond max_position_embeddings";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings (" + std::to_string(config_.max_position_embeddings)),
              std::string::npos) << e.what();
  }
  const int64_t room = config_.max_position_embeddings - batch_.input_ids.size(1);
  EXPECT_NO_THROW(generate(*model_, batch_.input_ids, batch_.attention_mask, {.max_new_tokens = room}));
}

}  // namespace
}  // namespace ferry
