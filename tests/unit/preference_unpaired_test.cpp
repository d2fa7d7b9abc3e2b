// Unpaired (KTO) data: the {"prompt", "completion", "label"} lines in text and message form, pair
// lines split as TRL's unpair_preference_dataset splits them, bad lines named by file:line or
// skipped and counted, and the KL rows of a group: each prompt with the previous completion, in
// the template's tokens, with the completion's loss mask.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "src/data/unpaired_dataset.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"
#include "train/preference/kto_batches.h"

namespace ferry {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

const std::string kSource = FERRY_SOURCE_DIR;

class UnpairedData : public ::testing::Test {
 protected:
  Tokenizer tokenizer{kSource + "/data/tokenizer.model"};
  ChatTemplate chat = load_chat_template(kSource + "/configs/templates/demo.yaml");

  std::string write(const std::string& name, const std::string& text) {
    const auto dir = ferry::test_support::process_scratch_dir("ferry_unpaired_test");
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  UnpairedDataset load(const std::string& path, bool skip, int64_t max_length = 512, int64_t max_samples = 0) {
    return load_unpaired_dataset(path, tokenizer, chat, max_length, skip, max_samples);
  }
  std::string text_of(const std::vector<int64_t>& ids) { return tokenizer.decode(ids); }
  std::string trained_text(const TokenizedSample& s) {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < s.ids.size(); ++i) {
      if (s.loss_mask[i]) ids.push_back(s.ids[i]);
    }
    return tokenizer.decode(ids);
  }
};

TEST_F(UnpairedData, TextLinesAreTokenisedAsTextAndMessageLinesThroughTheTemplate) {
  const std::string lines =
      R"({"prompt": "What is 2 + 3?", "completion": " 5", "label": true})" "\n"
      R"({"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}], )"
      R"("completion": [{"role": "assistant", "content": "6"}], "label": false})" "\n";
  const UnpairedDataset d = load(write("unpaired.jsonl", lines), false);
  ASSERT_EQ(d.examples.size(), 2u);
  // Text is TRL's standard format: tokenizer(prompt + completion + EOS), no template.
  EXPECT_EQ(d.examples[0].sample.ids, tokenizer.encode_as_sequence("What is 2 + 3? 5</s>"));
  EXPECT_TRUE(d.examples[0].desirable);
  EXPECT_FALSE(d.examples[1].desirable);
  EXPECT_EQ(trained_text(d.examples[1].sample), "6<|end|>");
  EXPECT_EQ(d.examples[1].sample.line, 2);
  EXPECT_EQ(d.stats.desirable, 1);
  EXPECT_EQ(d.stats.undesirable, 1);
}

TEST_F(UnpairedData, PairsAreSplitChosenBlockThenRejectedBlock) {
  std::string lines;
  for (int i = 0; i < 3; ++i) {
    lines += R"({"prompt": "Q)" + std::to_string(i) + R"(", "chosen": "good)" + std::to_string(i) +
             R"(", "rejected": "bad)" + std::to_string(i) + "\"}\n";
  }
  const UnpairedDataset d = load(write("pairs.jsonl", lines), false);
  ASSERT_EQ(d.examples.size(), 6u);
  // Text rows (TRL's standard format): the completion and EOS, which decodes to nothing.
  const std::vector<std::string> want{"good0", "good1", "good2", "bad0", "bad1", "bad2"};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(trained_text(d.examples[i].sample), want[i]) << i;
    EXPECT_EQ(d.examples[i].desirable, i < 3) << i;
  }
  EXPECT_EQ(d.stats.from_pairs, 6);
  // data.max_samples counts examples: 4 are the first two lines' four answers.
  const UnpairedDataset first = load(write("pairs.jsonl", lines), false, 512, 4);
  ASSERT_EQ(first.examples.size(), 4u);
  EXPECT_EQ(trained_text(first.examples[1].sample), "good1");
  EXPECT_EQ(trained_text(first.examples[2].sample), "bad0");
}

TEST_F(UnpairedData, BadLinesAreNamedOrSkippedAndCounted) {
  const std::string no_label = R"({"prompt": "Q", "completion": "A"})";
  try {
    load(write("no_label.jsonl", no_label + "\n"), false);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "no_label.jsonl:1");
    EXPECT_CONTAINS(e.what(), "\"label\"");
  }
  try {
    load(write("bad_label.jsonl", R"({"prompt": "Q", "completion": "A", "label": "yes"})" "\n"), false);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "bad_label.jsonl:1");
    EXPECT_CONTAINS(e.what(), "true or false");
  }
  const std::string mixed = R"({"prompt": "Q", "completion": "A", "label": true})" "\n"
                            R"({"prompt": "Q", "chosen": "A", "rejected": "B"})" "\n";
  try {
    load(write("mixed.jsonl", mixed), false);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "mixed.jsonl:2");
    EXPECT_CONTAINS(e.what(), "one kind per file");
  }
  const std::string empty = R"({"prompt": "Q", "completion": " ", "label": true})" "\n"
                            R"({"prompt": "Q", "completion": "A", "label": false})" "\n";
  EXPECT_THROW(load(write("empty.jsonl", empty), false), InputError);
  const UnpairedDataset skipped = load(write("empty.jsonl", empty), true);
  EXPECT_EQ(skipped.examples.size(), 1u);
  EXPECT_EQ(skipped.stats.empty_completion, 1);
  EXPECT_CONTAINS(skipped.stats.summary(), "1 empty completion");
}

TEST_F(UnpairedData, KlRowsJoinEachPromptToThePreviousCompletion) {
  const auto row = [](const std::string& prompt, const std::string& completion, bool label) {
    return R"({"prompt": [{"role": "user", "content": ")" + prompt + R"("}], "completion": [{"role": "assistant", "content": ")" +
           completion + R"("}], "label": )" + (label ? "true" : "false") + "}\n";
  };
  const std::string lines = row("What is 2 + 3?", "5", true) + row("Say hi", "Hello there", false) +
                            row("Name a colour", "Blue", true);
  UnpairedDataset d = load(write("kl.jsonl", lines), false);
  const KtoGroups groups = group_kto_examples(std::move(d.examples), 3, 512, false, 0);
  ASSERT_EQ(groups.groups(), 1);
  // Row 0 takes the last completion, row 1 row 0's, row 2 row 1's.
  const std::vector<std::pair<std::string, std::string>> want{
      {"What is 2 + 3?", "Blue"}, {"Say hi", "5"}, {"Name a colour", "Hello there"}};
  for (size_t i = 0; i < want.size(); ++i) {
    const TokenizedConversation expected =
        chat.apply({{ChatRole::user, want[i].first}, {ChatRole::assistant, want[i].second}}, tokenizer);
    const TokenizedSample& kl = groups.rows[i].rejected;
    EXPECT_EQ(text_of(kl.ids), text_of(expected.ids)) << i;
    EXPECT_EQ(trained_text(kl), want[i].second + "<|end|>") << i;
  }
  const MicroBatch batch = collate_kto_rows(groups, 0, 3, 0);
  EXPECT_EQ(batch.at("input_ids").size(0), 6);
  EXPECT_EQ(batch.loss_weight, 3);
  EXPECT_TRUE(batch.at("desirable").equal(torch::tensor({true, false, true})));
  // A KL row longer than max_length is cut.
  UnpairedDataset again = load(write("kl.jsonl", lines), false);
  const size_t short_prompt = groups.rows[1].chosen.ids.size();
  const KtoGroups cut = group_kto_examples(std::move(again.examples), 3, static_cast<int64_t>(short_prompt), false, 0);
  for (const auto& row : cut.rows) EXPECT_LE(row.rejected.ids.size(), short_prompt);
}

}  // namespace
}  // namespace ferry
