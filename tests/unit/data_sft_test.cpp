// SFT data: jsonl errors with file:line, round-preserving truncation, padding and packing
// collation, seeded epoch order and resumable sampling.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/data/epoch_order.h"
#include "src/data/jsonl_reader.h"
#include "src/data/sft_dataset.h"
#include "src/data/token_batch.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

const std::string kSource = FERRY_SOURCE_DIR;

class SftData : public ::testing::Test {
 protected:
  Tokenizer tokenizer{kSource + "/data/tokenizer.model"};
  ChatTemplate chat = load_chat_template(kSource + "/configs/templates/demo.yaml");

  std::string write(const std::string& name, const std::string& text) {
    const auto dir = ferry::test_support::process_scratch_dir("ferry_data_test");
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

const char* kGood =
    R"({"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}]})";

TEST_F(SftData, LoadsTheShippedEvalSet) {
  const std::string path = kSource + "/data/sft_eval.jsonl";
  std::ifstream in(path);
  int64_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += !line.empty();
  const SftDataset d = load_sft_dataset(path, tokenizer, chat, 512, false);
  EXPECT_EQ(d.stats.samples, lines);
  EXPECT_EQ(static_cast<int64_t>(d.samples.size()), lines);
  EXPECT_EQ(d.stats.truncated + d.stats.dropped_too_long + d.stats.jsonl.skipped, 0);
  for (const auto& s : d.samples) {
    ASSERT_EQ(s.ids.size(), s.loss_mask.size());
    EXPECT_GT(std::count(s.loss_mask.begin(), s.loss_mask.end(), 1), 0) << "line " << s.line;
    EXPECT_EQ(s.ids.front(), tokenizer.bos_id());
  }
}

TEST_F(SftData, MatchesTheTemplateOnEachConversation) {
  const auto path = write("one.jsonl", std::string("\n") + kGood + "\n");
  const SftDataset d = load_sft_dataset(path, tokenizer, chat, 512, false);
  ASSERT_EQ(d.samples.size(), 1u);
  EXPECT_EQ(d.samples[0].line, 2);  // the blank first line still counts
  const auto expected = chat.apply({{ChatRole::user, "What is 2 + 3?"}, {ChatRole::assistant, "5"}}, tokenizer);
  EXPECT_EQ(d.samples[0].ids, expected.ids);
  EXPECT_EQ(d.samples[0].loss_mask, expected.loss_mask);
}

TEST_F(SftData, BadLinesNameFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"{not json", "invalid JSON"},
      {R"({"messages": 1e99999})", "invalid JSON: [json.exception.out_of_range.406]"},  // found by fuzzing
      {R"({"conversation": []})", "an SFT row needs \"messages\""},
      {R"({"messages": [{"role": "robot", "content": "hi"}]})", "unknown role \"robot\""},
      {R"({"messages": [{"role": "user"}]})", "needs a string \"content\""},
      {R"({"messages": [{"role": "assistant", "content": "5"}, {"role": "user", "content": "x"}]})", ""},
      {R"([1, 2])", "expected a JSON object"},
  };
  for (const auto& [line, expected] : cases) {
    const auto path = write("bad.jsonl", std::string(kGood) + "\n" + line + "\n");
    try {
      load_sft_dataset(path, tokenizer, chat, 512, false);
      ADD_FAILURE() << "no error for: " << line;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), path + ":2: ");
      EXPECT_CONTAINS(e.what(), expected);
      EXPECT_CONTAINS(e.what(), "skip_bad_lines");
    }
  }
}

TEST_F(SftData, SkipBadLinesCountsThem) {
  const auto path = write("mixed.jsonl", std::string(kGood) + "\n{oops\n" + kGood + "\n{\"messages\": 3}\n");
  const SftDataset d = load_sft_dataset(path, tokenizer, chat, 512, true);
  EXPECT_EQ(d.stats.samples, 2);
  EXPECT_EQ(d.stats.jsonl.skipped, 2);
  EXPECT_CONTAINS(d.stats.summary(), "2 bad lines skipped");
  EXPECT_CONTAINS(d.stats.jsonl.first_skipped_error, ":2:");
}

// A runaway line (100 MB here) is an error naming file:line, read without holding it in memory; a
// small limit shows the same through read_jsonl, and skipping counts it like any bad line.
TEST_F(SftData, OverlongLinesAreBadLinesNotMemory) {
  const std::string huge = "{\"messages\": [{\"role\": \"user\", \"content\": \"" + std::string(100'000'000, 'a') + "\"}]}";
  const auto path = write("huge.jsonl", std::string(kGood) + "\n" + huge + "\n" + kGood + "\n");
  try {
    load_sft_dataset(path, tokenizer, chat, 512, false);
    ADD_FAILURE() << "no error for a 100 MB line";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), path + ":2: the line is " + std::to_string(huge.size()) + " bytes, more than the 16777216");
  }
  const SftDataset skipped = load_sft_dataset(path, tokenizer, chat, 512, true);
  EXPECT_EQ(skipped.stats.samples, 2);
  EXPECT_EQ(skipped.stats.jsonl.skipped, 1);
  int64_t read = 0;
  const JsonlStats small = read_jsonl(path, true, [&](int64_t, const nlohmann::json&) { ++read; }, 100);
  EXPECT_EQ(read, 2);  // kGood fits in 100 bytes
  EXPECT_EQ(small.skipped, 1);
  std::filesystem::remove(path);
}

TEST_F(SftData, MissingFileIsAnInputError) {
  EXPECT_THROW(load_sft_dataset("/nonexistent.jsonl", tokenizer, chat, 512, false), InputError);
}

TEST_F(SftData, TruncationKeepsWholeRounds) {
  const Conversation three{{ChatRole::user, "What is 1 + 1?"}, {ChatRole::assistant, "2"},
                           {ChatRole::user, "What is 2 + 2?"}, {ChatRole::assistant, "4"},
                           {ChatRole::user, "What is 3 + 3?"}, {ChatRole::assistant, "6"}};
  const Conversation two(three.begin(), three.begin() + 4);
  const Conversation one(three.begin(), three.begin() + 2);
  const auto two_ids = chat.apply(two, tokenizer).ids;
  const auto three_ids = chat.apply(three, tokenizer).ids;
  ASSERT_LT(two_ids.size(), three_ids.size());
  const auto path = write("rounds.jsonl",
                          R"({"messages": [{"role": "user", "content": "What is 1 + 1?"}, {"role": "assistant", "content": "2"}, )"
                          R"({"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}, )"
                          R"({"role": "user", "content": "What is 3 + 3?"}, {"role": "assistant", "content": "6"}]})"
                          "\n");
  // Room for two rounds but not three: the third is dropped whole.
  SftDataset d = load_sft_dataset(path, tokenizer, chat, static_cast<int64_t>(three_ids.size()) - 1, false);
  ASSERT_EQ(d.samples.size(), 1u);
  EXPECT_EQ(d.samples[0].ids, two_ids);
  EXPECT_EQ(d.samples[0].loss_mask, chat.apply(two, tokenizer).loss_mask);
  EXPECT_EQ(d.stats.truncated, 1);
  EXPECT_EQ(d.stats.rounds_dropped, 1);
  // Not even the first round fits: the sample is dropped and counted.
  const auto one_len = static_cast<int64_t>(chat.apply(one, tokenizer).ids.size());
  d = load_sft_dataset(path, tokenizer, chat, one_len - 1, false);
  EXPECT_TRUE(d.samples.empty());
  EXPECT_EQ(d.stats.dropped_too_long, 1);
}

TokenizedSample sample(std::vector<int64_t> ids, std::vector<uint8_t> mask) { return {std::move(ids), std::move(mask), 0}; }

TEST(TokenBatchTest, PaddedRowsAndLabels) {
  const auto a = sample({1, 10, 11}, {0, 0, 1});
  const auto b = sample({1, 20, 21, 22, 23}, {0, 1, 1, 0, 1});
  const TokenBatch batch = collate_padded({&a, &b}, /*pad_id=*/3);
  const auto i64 = torch::TensorOptions().dtype(torch::kLong);
  EXPECT_TRUE(torch::equal(batch.input_ids, torch::tensor({1, 10, 11, 3, 3, 1, 20, 21, 22, 23}, i64).view({2, 5})));
  EXPECT_TRUE(torch::equal(batch.attention_mask, torch::tensor({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, i64).view({2, 5})));
  EXPECT_TRUE(torch::equal(batch.labels, torch::tensor({-100, -100, 11, -100, -100, -100, 20, 21, -100, 23}, i64).view({2, 5})));
  EXPECT_TRUE(torch::equal(batch.position_ids.select(1, 2), torch::tensor({2, 2}, i64)));
  EXPECT_FALSE(batch.segment_ids.defined());
  EXPECT_EQ(batch.tokens, 8);
  EXPECT_EQ(batch.loss_tokens, 4);
}

TEST(TokenBatchTest, PackingKeepsSamplesWholeAndRestartsPositions) {
  const auto a = sample({1, 2, 3, 4}, {0, 1, 1, 1});
  const auto b = sample({5, 6, 7}, {0, 0, 1});
  const auto c = sample({8, 9}, {0, 1});
  const TokenBatch batch = collate_packed({&a, &b, &c}, /*pad_id=*/0, /*row_length=*/6);
  // First fit: row 0 = a + c (6 tokens), row 1 = b.
  const auto i64 = torch::TensorOptions().dtype(torch::kLong);
  EXPECT_TRUE(torch::equal(batch.input_ids, torch::tensor({1, 2, 3, 4, 8, 9, 5, 6, 7, 0, 0, 0}, i64).view({2, 6})));
  EXPECT_TRUE(torch::equal(batch.position_ids, torch::tensor({0, 1, 2, 3, 0, 1, 0, 1, 2, 0, 0, 0}, i64).view({2, 6})));
  EXPECT_TRUE(torch::equal(batch.segment_ids, torch::tensor({1, 1, 1, 1, 2, 2, 1, 1, 1, 0, 0, 0}, i64).view({2, 6})));
  EXPECT_TRUE(torch::equal(batch.labels, torch::tensor({-100, 2, 3, 4, -100, 9, -100, -100, 7, -100, -100, -100}, i64).view({2, 6})));
  EXPECT_EQ(batch.tokens, 9);
  EXPECT_EQ(batch.loss_tokens, 5);
}

TEST(TokenBatchTest, PackedMaskMatchesDefinition) {
  const auto segments = torch::tensor({1, 1, 2, 2, 2, 0}, torch::kLong).view({1, 6});
  const auto mask = packed_attention_mask(segments);
  ASSERT_EQ(mask.sizes(), (std::vector<int64_t>{1, 1, 6, 6}));
  auto seg = segments.accessor<int64_t, 2>();
  for (int64_t q = 0; q < 6; ++q) {
    for (int64_t k = 0; k < 6; ++k) {
      const bool expected = q == k || (k <= q && seg[0][q] == seg[0][k] && seg[0][q] != 0);
      EXPECT_EQ(mask[0][0][q][k].item<bool>(), expected) << q << "," << k;
    }
  }
}

TEST(EpochOrderTest, SeededPermutations) {
  const auto a = epoch_order(1000, 42, 0);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 1000u);
  EXPECT_EQ(*std::min_element(a.begin(), a.end()), 0);
  EXPECT_EQ(*std::max_element(a.begin(), a.end()), 999);
  EXPECT_EQ(a, epoch_order(1000, 42, 0));
  EXPECT_NE(a, epoch_order(1000, 42, 1));
  EXPECT_NE(a, epoch_order(1000, 43, 0));
}

TEST(EpochOrderTest, SamplerResumesExactly) {
  EpochSampler run(10, 7, true);
  std::vector<int64_t> seen;
  for (int i = 0; i < 3; ++i) {
    const auto batch = run.next(4);  // 12 samples: crosses into epoch 1
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(run.cursor(), (DataCursor{1, 2}));
  const auto first_epoch = epoch_order(10, 7, 0);
  EXPECT_EQ(std::vector<int64_t>(seen.begin(), seen.begin() + 10), first_epoch);
  EpochSampler resumed(10, 7, true, run.cursor());
  EXPECT_EQ(resumed.next(5), run.next(5));
  EpochSampler in_order(3, 7, false);
  EXPECT_EQ(in_order.next(4), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_THROW(EpochSampler(0, 1, true), InputError);
}

TEST(EpochOrderTest, EvalSplitIsDisjointAndSeeded) {
  std::vector<TokenizedSample> train;
  for (int64_t i = 0; i < 100; ++i) train.push_back({{i}, {1}, i + 1});
  auto copy = train;
  const auto eval = split_off_eval(train, 0.1, 5);
  EXPECT_EQ(eval.size(), 10u);
  EXPECT_EQ(train.size(), 90u);
  std::set<int64_t> lines;
  for (const auto& s : train) lines.insert(s.line);
  for (const auto& s : eval) EXPECT_EQ(lines.count(s.line), 0u);
  const auto eval2 = split_off_eval(copy, 0.1, 5);
  for (size_t i = 0; i < eval.size(); ++i) EXPECT_EQ(eval[i].line, eval2[i].line);
}

}  // namespace
}  // namespace ferry
