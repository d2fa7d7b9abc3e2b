// Data-parallel rollouts (train/rl/experience_gatherer.h): a row samples the same tokens whichever batch it is
// in (checked against a plain inverse-CDF draw on the row alone), rows and micro-batches split over processes
// as documented, and two processes' experiences gather into the padded whole built by hand.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "src/generate/sampling.h"
#include "tests/support/naive_sampling.h"
#include "tests/support/two_process_group.h"
#include "train/rl/experience_gatherer.h"

namespace ferry {
namespace {

TEST(RolloutRowGenerators, ARowSamplesTheSameTokensAloneOrInAnyBatch) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({4, 50});
  const SamplingOptions options{.greedy = false, .temperature = 0.9, .top_k = 0, .top_p = 1.0};
  std::vector<at::Generator> all = rl::rollout_row_generators(7, 2, 0, 4);
  std::vector<at::Generator> last_two = rl::rollout_row_generators(7, 2, 2, 2);
  for (int draw = 0; draw < 20; ++draw) {
    const torch::Tensor batch = choose_next_tokens(logits, options, all);
    const torch::Tensor part = choose_next_tokens(logits.narrow(0, 2, 2), options, last_two);
    EXPECT_TRUE(torch::equal(batch.narrow(0, 2, 2), part)) << "draw " << draw;
  }
  // The reference: each row alone, its softmax and one draw from its own generator.
  std::vector<at::Generator> fresh = rl::rollout_row_generators(7, 2, 0, 4);
  const torch::Tensor tokens = choose_next_tokens(logits, options, fresh);
  for (int64_t row = 0; row < 4; ++row) {
    at::Generator own = rl::rollout_row_generators(7, 2, row, 1).front();
    const int64_t alone = test_support::naive_inverse_cdf_sample((logits[row] / 0.9).softmax(-1), draw_uniform(own));
    EXPECT_EQ(tokens[row].item<int64_t>(), alone) << "row " << row;
  }
  // Other rollouts, seeds and rows draw differently.
  std::vector<at::Generator> other_rollout = rl::rollout_row_generators(7, 3, 0, 4);
  std::vector<at::Generator> again = rl::rollout_row_generators(7, 2, 0, 4);
  int differ = 0;
  for (int draw = 0; draw < 10; ++draw) {
    differ += torch::equal(choose_next_tokens(logits, options, again), choose_next_tokens(logits, options, other_rollout)) ? 0 : 1;
  }
  EXPECT_GT(differ, 5);
}

TEST(RolloutShare, RowsSplitEvenlyInRankOrderOrTheSettingIsNamed) {
  const rl::RolloutShare alone = rl::rollout_share(6, nullptr, "ppo.rollout_batch_size");
  EXPECT_EQ(alone.first, 0);
  EXPECT_EQ(alone.count, 6);
}

TEST(RolloutShare, MicroBatchesGoRoundRobinAndZero3PadsTheShortProcess) {
  const std::vector<rl::MicroBatchTurn> alone = rl::own_micro_batches(3, nullptr, false);
  ASSERT_EQ(alone.size(), 3u);
  EXPECT_EQ(alone[2].index, 2);
  if (!dist::gloo_compiled_in()) {
    GTEST_SKIP() << "[needs gloo] built without the Gloo headers (apt-get install libgloo-dev)";
  }
  ferry_test::run_two_processes([](int64_t rank, dist::Communicator& comm) {
    const rl::RolloutShare share = rl::rollout_share(6, &comm, "ppo.rollout_batch_size");
    EXPECT_EQ(share.first, 3 * rank);
    EXPECT_EQ(share.count, 3);
    try {
      (void)rl::rollout_share(5, &comm, "grpo.generation_batch_size");
      ADD_FAILURE() << "5 rows over 2 processes were accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("grpo.generation_batch_size"), std::string::npos) << e.what();
    }
    // 5 micro-batches: rank 0 runs 0, 2, 4; rank 1 runs 1, 3 and, when forwards are collective,
    // micro-batch 0 again as padding.
    const std::vector<rl::MicroBatchTurn> plain = rl::own_micro_batches(5, &comm, false);
    const std::vector<rl::MicroBatchTurn> padded = rl::own_micro_batches(5, &comm, true);
    std::vector<int64_t> indices;
    for (const rl::MicroBatchTurn& t : plain) indices.push_back(t.index);
    EXPECT_EQ(indices, rank == 0 ? std::vector<int64_t>({0, 2, 4}) : std::vector<int64_t>({1, 3}));
    ASSERT_EQ(padded.size(), 3u);
    EXPECT_EQ(padded[2].padding, rank == 1);
    EXPECT_EQ(padded[2].index, rank == 0 ? 4 : 0);
  });
}

// One process's experience: `rows` rows, prompt P and response R columns, entries from `base`.
rl::Experience local_experience(int64_t rows, int64_t p, int64_t r, int64_t base) {
  rl::Experience e;
  e.prompt_length = p;
  e.sequences = torch::arange(base, base + rows * (p + r), torch::kLong).view({rows, p + r});
  e.attention_mask = torch::ones({rows, p + r}, torch::kLong);
  e.response_mask = torch::ones({rows, r});
  e.logprobs = -torch::arange(1, rows * r + 1, torch::kFloat).view({rows, r}) - static_cast<double>(base);
  e.raw_scores = torch::full({rows}, static_cast<double>(base));
  e.ended = torch::tensor({true, false}, torch::kBool).narrow(0, 0, rows);
  for (int64_t i = 0; i < rows; ++i) {
    e.prompt_index.push_back(base + i);
    e.responses.push_back(std::string(static_cast<size_t>(base / 100 + i), 'x') + "é");
  }
  return e;
}

TEST(GatherExperience, TwoProcessesGiveThePaddedWholeInRankOrder) {
  if (!dist::gloo_compiled_in()) {
    GTEST_SKIP() << "[needs gloo] built without the Gloo headers (apt-get install libgloo-dev)";
  }
  constexpr int64_t kPad = 9;
  // Rank 0: P 3, R 2; rank 1: P 2, R 4. The whole: P 3, R 4.
  const rl::Experience parts[2] = {local_experience(2, 3, 2, 100), local_experience(2, 2, 4, 200)};
  rl::Experience gathered[2];
  ferry_test::run_two_processes([&](int64_t rank, dist::Communicator& comm) {
    gathered[rank] = rl::gather_experience(parts[rank], comm, kPad);
  });
  // By hand: each part's prompt right-aligned at column 3, response from column 3.
  torch::Tensor sequences = torch::full({4, 7}, kPad, torch::kLong);
  torch::Tensor attention = torch::zeros({4, 7}, torch::kLong);
  torch::Tensor response_mask = torch::zeros({4, 4});
  torch::Tensor logprobs = torch::zeros({4, 4});
  for (int64_t r = 0; r < 2; ++r) {
    const rl::Experience& e = parts[r];
    const int64_t p = e.prompt_length, len = e.response_length();
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t c = 0; c < p + len; ++c) {
        sequences[2 * r + i][3 - p + c] = e.sequences[i][c];
        attention[2 * r + i][3 - p + c] = 1;
      }
      for (int64_t c = 0; c < len; ++c) {
        response_mask[2 * r + i][c] = 1;
        logprobs[2 * r + i][c] = e.logprobs[i][c];
      }
    }
  }
  for (const rl::Experience& g : gathered) {
    EXPECT_EQ(g.prompt_length, 3);
    EXPECT_TRUE(torch::equal(g.sequences, sequences));
    EXPECT_TRUE(torch::equal(g.attention_mask, attention));
    EXPECT_TRUE(torch::equal(g.response_mask, response_mask));
    EXPECT_TRUE(torch::equal(g.logprobs, logprobs));
    EXPECT_TRUE(torch::equal(g.raw_scores, torch::tensor({100.0f, 100.0f, 200.0f, 200.0f})));
    EXPECT_TRUE(torch::equal(g.ended, torch::tensor({true, false, true, false}, torch::kBool)));
    EXPECT_FALSE(g.values.defined());
    EXPECT_EQ(g.prompt_index, std::vector<int64_t>({100, 101, 200, 201}));
    EXPECT_EQ(g.responses, std::vector<std::string>({"xé", "xxé", "xxé", "xxxé"}));
  }
}

}  // namespace
}  // namespace ferry
