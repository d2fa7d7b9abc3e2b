// Rows that share a prompt, packed into one forward (train/rl/shared_prompt_pack.h), against a
// naive per-row loop: each row's own tokens (no padding) through the model's plain forward, then
// log_softmax at the response positions. Rollout-shaped rows: three prompts of different lengths
// (one a single token) with 3, 1 and 4 responses, left-padded, responses that end early (padding
// after) and one that fills the budget; rows interleaved, so groups are found by their tokens, not
// by order. Log-probs and entropy equal the loop's; the weights' gradients equal the unpacked
// forward's; the minibatch order keeps a prompt's rows together.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "offload/engine.h"
#include "src/model/model_heads.h"
#include "tests/support/tiny_llama_config.h"
#include "train/backbone_runner.h"
#include "train/rl/policy_forward.h"
#include "train/rl/shared_prompt_pack.h"

namespace ferry {
namespace {

constexpr int64_t kPromptColumns = 6, kResponseColumns = 5, kPad = 0;

struct Rollout {
  torch::Tensor sequences, attention_mask;
  std::vector<std::vector<int64_t>> prompts, responses;  // per row, without padding
};

// Rows in an interleaved order: prompt A (5 tokens) x3, B (1 token) x1, C (6 tokens) x4.
Rollout make_rollout() {
  const std::vector<int64_t> a{11, 12, 13, 14, 15}, b{21}, c{31, 32, 33, 34, 35, 36};
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> rows{
      {a, {40, 41, 42}},     {c, {50, 51, 52, 53, 54}}, {a, {43}},         {b, {60, 61}},
      {c, {55, 56}},         {a, {44, 45, 46, 47, 48}}, {c, {57, 58, 59}}, {c, {70}}};
  Rollout r;
  const int64_t n = static_cast<int64_t>(rows.size());
  r.sequences = torch::full({n, kPromptColumns + kResponseColumns}, kPad, torch::kLong);
  r.attention_mask = torch::zeros({n, kPromptColumns + kResponseColumns}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const auto& [prompt, response] = rows[static_cast<size_t>(i)];
    const int64_t lp = static_cast<int64_t>(prompt.size());
    for (int64_t j = 0; j < lp; ++j) {
      r.sequences[i][kPromptColumns - lp + j] = prompt[static_cast<size_t>(j)];
      r.attention_mask[i][kPromptColumns - lp + j] = 1;
    }
    for (size_t j = 0; j < response.size(); ++j) {
      r.sequences[i][kPromptColumns + static_cast<int64_t>(j)] = response[j];
      r.attention_mask[i][kPromptColumns + static_cast<int64_t>(j)] = 1;
    }
    r.prompts.push_back(prompt);
    r.responses.push_back(response);
  }
  return r;
}

struct Model {
  CausalLM lm{nullptr};
  std::unique_ptr<offload::ParameterEngine> engine;
  Model() {
    torch::manual_seed(3);
    lm = CausalLM(test_support::tiny_llama_config(101));
    engine = offload::make_parameter_engine(offload::EngineOptions{});
    engine->add_model("policy", offload::group_parameters(*lm, false), true);
    engine->make_resident({"policy"});
  }
};

TEST(SharedPromptPack, GroupsRowsByPromptTokens) {
  const Rollout r = make_rollout();
  const auto pack = rl::pack_shared_prompts(r.sequences, r.attention_mask, kPromptColumns);
  ASSERT_TRUE(pack.has_value());
  EXPECT_EQ(pack->input_ids.size(0), 3);  // three distinct prompts
  // Shared part: the longest prompt but its last token (5); 4 blocks of R + 1 columns.
  EXPECT_EQ(pack->first_column, 5);
  EXPECT_EQ(pack->input_ids.size(1), 5 + 4 * (kResponseColumns + 1));
  EXPECT_LT(pack->packed_tokens(), r.sequences.numel());
  // Every row's response tokens are where row_index says, each block opening with the prompt's last token.
  const torch::Tensor targets = pack->unpack(pack->targets);
  EXPECT_TRUE(torch::equal(targets, r.sequences.narrow(1, kPromptColumns, kResponseColumns)));
  const auto ids = pack->input_ids.accessor<int64_t, 2>();
  const auto where = pack->row_index.accessor<int64_t, 1>();
  const int64_t columns = pack->targets.size(1);
  for (int64_t row = 0; row < 8; ++row) {
    const int64_t g = where[row * kResponseColumns] / columns, at = where[row * kResponseColumns] % columns;
    EXPECT_EQ(ids[g][pack->first_column + at], r.prompts[static_cast<size_t>(row)].back()) << "row " << row;
  }
}

TEST(SharedPromptPack, NothingToPackWhenEveryPromptDiffers) {
  const Rollout r = make_rollout();
  const torch::Tensor distinct = torch::tensor({0, 1, 3}, torch::kLong);  // one row of each prompt
  EXPECT_FALSE(rl::pack_shared_prompts(r.sequences.index_select(0, distinct), r.attention_mask.index_select(0, distinct),
                                       kPromptColumns)
                   .has_value());
}

TEST(SharedPromptPack, LogProbsAndEntropyEqualAPerRowLoop) {
  Model m;
  const Rollout r = make_rollout();
  BackboneRunner runner(*m.engine, false, /*logits_chunk=*/3);
  const double temperature = 0.7;
  torch::NoGradGuard no_grad;
  const kernels::LmHeadTokens packed = rl::response_token_logprobs(
      runner, "policy", *m.lm, r.sequences, r.attention_mask, kPromptColumns, temperature, true, true);
  for (int64_t row = 0; row < 8; ++row) {
    std::vector<int64_t> tokens = r.prompts[static_cast<size_t>(row)];
    const std::vector<int64_t>& response = r.responses[static_cast<size_t>(row)];
    tokens.insert(tokens.end(), response.begin(), response.end());
    const torch::Tensor ids = torch::tensor(tokens, torch::kLong).unsqueeze(0);
    const torch::Tensor logits = m.lm->forward(ids).squeeze(0).to(torch::kDouble) / temperature;  // (T, V)
    const torch::Tensor log_p = torch::log_softmax(logits, -1);
    const int64_t lp = static_cast<int64_t>(r.prompts[static_cast<size_t>(row)].size());
    for (size_t t = 0; t < response.size(); ++t) {
      const int64_t at = lp - 1 + static_cast<int64_t>(t);
      const double want = log_p[at][response[t]].item<double>();
      const double entropy = -(log_p[at].exp() * log_p[at]).sum().item<double>();
      EXPECT_NEAR(packed.logprobs[row][static_cast<int64_t>(t)].item<double>(), want, 1e-5) << row << "," << t;
      EXPECT_NEAR(packed.entropy[row][static_cast<int64_t>(t)].item<double>(), entropy, 1e-5) << row << "," << t;
    }
  }
}

TEST(SharedPromptPack, GradientsEqualTheUnpackedForward) {
  const Rollout r = make_rollout();
  const torch::Tensor weights = torch::randn({8, kResponseColumns}, torch::TensorOptions().dtype(torch::kFloat)) *
                                r.attention_mask.narrow(1, kPromptColumns, kResponseColumns).to(torch::kFloat);
  std::vector<std::vector<torch::Tensor>> grads;
  for (bool share : {false, true}) {
    Model m;  // the same seed: the same weights
    BackboneRunner runner(*m.engine, false, /*logits_chunk=*/-1);
    const kernels::LmHeadTokens t = rl::response_token_logprobs(runner, "policy", *m.lm, r.sequences,
                                                                r.attention_mask, kPromptColumns, 1.0, true, share);
    ((t.logprobs + 0.1 * t.entropy) * weights).sum().backward();
    grads.emplace_back();
    for (const torch::Tensor& p : m.lm->parameters()) grads.back().push_back(p.grad().clone());
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const double scale = std::max(grads[0][i].abs().max().item<double>(), 1e-3);
    EXPECT_LE((grads[0][i] - grads[1][i]).abs().max().item<double>() / scale, 1e-4) << "parameter " << i;
  }
}

TEST(SharedPromptPack, MinibatchOrderKeepsAPromptsRowsTogether) {
  const torch::Tensor chosen = torch::tensor({7, 2, 5, 0}, torch::kLong);
  EXPECT_TRUE(torch::equal(rl::minibatch_rows_in_order(chosen, true), torch::tensor({0, 2, 5, 7}, torch::kLong)));
  EXPECT_TRUE(torch::equal(rl::minibatch_rows_in_order(chosen, false), chosen));
}

}  // namespace
}  // namespace ferry
