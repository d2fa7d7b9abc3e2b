// Preference data: both line formats, the loss mask on the final assistant turn only, truncation,
// every bad-pair kind skipped and counted or rejected with file:line, and the (2B, T) collation
// with chosen rows first.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "src/data/preference_dataset.h"
#include "src/data/token_batch.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"
#include "train/preference/preference_batches.h"

namespace ferry {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

const std::string kSource = FERRY_SOURCE_DIR;

class PreferenceData : public ::testing::Test {
 protected:
  Tokenizer tokenizer{kSource + "/data/tokenizer.model"};
  ChatTemplate chat = load_chat_template(kSource + "/configs/templates/demo.yaml");

  std::string write(const std::string& name, const std::string& text) {
    const auto dir = ferry::test_support::process_scratch_dir("ferry_preference_test");
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  PreferenceDataset load(const std::string& path, bool skip, int64_t max_length = 512) {
    return load_preference_dataset(path, tokenizer, chat, max_length, skip);
  }
  // The trained tokens of a sample, decoded.
  std::string trained_text(const TokenizedSample& s) {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < s.ids.size(); ++i) {
      if (s.loss_mask[i]) ids.push_back(s.ids[i]);
    }
    return tokenizer.decode(ids);
  }
};

const std::string kSystem = R"({"role": "system", "content": "Be brief."})";
const std::string kUser = R"({"role": "user", "content": "What is 2 + 3?"})";
const std::string kColossal = R"({"context": [)" + kSystem + ", " + kUser +
                              R"(], "chosen": [{"role": "assistant", "content": "5"}], "rejected": [{"role": "assistant", "content": "6"}]})";

TEST_F(PreferenceData, EveryFormatGivesItsIds) {
  const std::string trl_messages = R"({"prompt": [)" + kSystem + ", " + kUser +
                                   R"(], "chosen": [{"role": "assistant", "content": "5"}], "rejected": [{"role": "assistant", "content": "6"}], "margin": 1.5})";
  const std::string trl_text = R"({"prompt": "What is 2 + 3?", "chosen": " 5", "rejected": " 6"})";
  const PreferenceDataset d = load(write("formats.jsonl", kColossal + "\n" + trl_messages + "\n" + trl_text + "\n"), false);
  ASSERT_EQ(d.pairs.size(), 3u);
  const Conversation whole{{ChatRole::system, "Be brief."}, {ChatRole::user, "What is 2 + 3?"}, {ChatRole::assistant, "5"}};
  const TokenizedConversation expected = chat.apply(whole, tokenizer);
  EXPECT_EQ(d.pairs[0].chosen.ids, expected.ids);
  EXPECT_EQ(d.pairs[0].chosen.loss_mask, expected.loss_mask);  // one round: the answer and <|end|>
  EXPECT_EQ(d.pairs[1].chosen.ids, expected.ids);
  EXPECT_EQ(d.pairs[0].margin, 0.0);
  EXPECT_EQ(d.pairs[1].margin, 1.5);
  // Plain text is TRL's standard format: tokenizer(prompt + response + EOS), no chat template, the
  // loss on every token after the prompt's.
  const std::vector<int64_t> prompt = tokenizer.encode_as_sequence("What is 2 + 3?");
  const std::vector<int64_t> plain = tokenizer.encode_as_sequence("What is 2 + 3? 6</s>");
  EXPECT_EQ(d.pairs[2].rejected.ids, plain);
  ASSERT_EQ(std::vector<int64_t>(plain.begin(), plain.begin() + prompt.size()), prompt);
  EXPECT_EQ(std::count(d.pairs[2].rejected.loss_mask.begin(), d.pairs[2].rejected.loss_mask.end(), 1),
            static_cast<int64_t>(plain.size() - prompt.size()));
  EXPECT_EQ(d.pairs[2].rejected.ids.back(), tokenizer.eos_id());
  EXPECT_EQ(d.pairs[1].chosen.line, 2);
}

TEST_F(PreferenceData, OnlyTheFinalAssistantTurnIsTrained) {
  const std::string line =
      R"({"context": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "What is 2 + 3?"}], )"
      R"("chosen": [{"role": "assistant", "content": "5"}], "rejected": [{"role": "assistant", "content": "7"}]})";
  const PreferenceDataset d = load(write("turns.jsonl", line + "\n"), false);
  ASSERT_EQ(d.pairs.size(), 1u);
  EXPECT_EQ(trained_text(d.pairs[0].chosen), "5<|end|>");  // not "Hello<|end|>5<|end|>"
  EXPECT_EQ(trained_text(d.pairs[0].rejected), "7<|end|>");
}

TEST_F(PreferenceData, LongResponsesAreCutAtMaxLength) {
  const std::string line = R"({"prompt": [{"role": "user", "content": "Count"}], "chosen": [{"role": "assistant", "content": "one two three four five six seven eight nine ten"}], "rejected": [{"role": "assistant", "content": "one"}]})";
  const std::string path = write("long.jsonl", line + "\n");
  const int64_t prompt_tokens = static_cast<int64_t>(chat.render_prompt({{ChatRole::user, "Count"}}, tokenizer).size());
  const PreferenceDataset d = load(path, false, prompt_tokens + 3);
  ASSERT_EQ(d.pairs.size(), 1u);
  EXPECT_EQ(d.stats.truncated, 1);
  EXPECT_EQ(static_cast<int64_t>(d.pairs[0].chosen.ids.size()), prompt_tokens + 3);
  EXPECT_EQ(std::count(d.pairs[0].chosen.loss_mask.begin(), d.pairs[0].chosen.loss_mask.end(), 1), 3);
}

TEST_F(PreferenceData, BadPairsAreCountedWhenSkippedAndNamedOtherwise) {
  const std::string empty = R"({"prompt": "Q", "chosen": "", "rejected": "b"})";
  const std::string empty_list = R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "assistant", "content": "a"}], "rejected": []})";
  const std::string identical = R"({"prompt": "Q", "chosen": "same", "rejected": "same"})";
  const std::string long_prompt = R"({"prompt": ")" + std::string(300, 'x') + R"(", "chosen": "a", "rejected": "b"})";
  const std::string good = R"({"prompt": "Q", "chosen": "a", "rejected": "b"})";
  const std::string path =
      write("bad.jsonl", good + "\n" + empty + "\n" + empty_list + "\n" + identical + "\n" + long_prompt + "\n{oops\n");
  const PreferenceDataset d = load(path, /*skip=*/true, 64);
  EXPECT_EQ(d.stats.pairs, 1);
  EXPECT_EQ(d.stats.empty_response, 2);
  EXPECT_EQ(d.stats.identical, 1);
  EXPECT_EQ(d.stats.no_room, 1);
  EXPECT_EQ(d.stats.jsonl.skipped, 1);
  EXPECT_CONTAINS(d.stats.summary(), "2 empty response, 1 chosen identical to rejected, 1 prompt leaving no room");

  const std::vector<std::pair<std::string, std::string>> cases{{empty, "chosen response is empty"},
                                                               {empty_list, "rejected response is empty"},
                                                               {identical, "identical"},
                                                               {long_prompt, "no room for a response"}};
  for (const auto& [line, reason] : cases) {
    const std::string one = write("one_bad.jsonl", good + "\n" + line + "\n");
    try {
      load(one, /*skip=*/false, 64);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), one + ":2: bad pair");
      EXPECT_CONTAINS(e.what(), reason);
      EXPECT_CONTAINS(e.what(), "data.skip_bad_lines");
    }
  }
  EXPECT_THROW(load(write("shape.jsonl", R"({"chosen": "a"})"), false), InputError);
  EXPECT_THROW(load(write("mixed.jsonl", R"({"prompt": "Q", "chosen": "a", "rejected": [{"role": "assistant", "content": "b"}]})"), false),
               InputError);
  EXPECT_THROW(load(write("margin.jsonl", R"({"prompt": "Q", "chosen": "a", "rejected": "b", "margin": "big"})"), false),
               InputError);
}

TEST_F(PreferenceData, CollationPutsChosenRowsFirst) {
  const std::string path = write("two.jsonl", kColossal + "\n" + R"({"prompt": "Q", "chosen": "long answer here", "rejected": "b", "margin": 2})" + "\n");
  PreferenceDataset d = load(path, false);
  d.pairs[0].reference_chosen_logps = -1.5;
  d.pairs[0].reference_rejected_logps = -2.5;
  d.pairs[1].reference_chosen_logps = -3.5;
  d.pairs[1].reference_rejected_logps = -4.5;
  const MicroBatch batch = collate_preference_pairs({&d.pairs[0], &d.pairs[1]}, tokenizer.pad_id());
  EXPECT_EQ(batch.loss_weight, 2);
  const torch::Tensor ids = batch.at("input_ids"), labels = batch.at("labels");
  ASSERT_EQ(ids.size(0), 4);
  const std::vector<const TokenizedSample*> rows{&d.pairs[0].chosen, &d.pairs[1].chosen, &d.pairs[0].rejected,
                                                 &d.pairs[1].rejected};
  for (int64_t r = 0; r < 4; ++r) {
    const TokenizedSample& s = *rows[static_cast<size_t>(r)];
    for (int64_t t = 0; t < ids.size(1); ++t) {
      const bool real = t < static_cast<int64_t>(s.ids.size());
      EXPECT_EQ(ids[r][t].item<int64_t>(), real ? s.ids[t] : tokenizer.pad_id());
      EXPECT_EQ(labels[r][t].item<int64_t>(), real && s.loss_mask[t] ? s.ids[t] : kIgnoreLabel);
      EXPECT_EQ(batch.at("attention_mask")[r][t].item<int64_t>(), real ? 1 : 0);
    }
  }
  EXPECT_TRUE(torch::equal(batch.at("margin"), torch::tensor({0.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(batch.at("reference_logps"), torch::tensor({-1.5, -3.5, -2.5, -4.5}, torch::kDouble)));
}

}  // namespace
}  // namespace ferry
