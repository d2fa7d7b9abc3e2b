// PromptFile: the prompts a rollout loads again from the file equal the chat template's rendering of
// the same conversations (built here by hand, not read through the file); blank, too-long and
// (with skip_bad_lines) malformed lines are left out with their line numbers kept; a bad line stops
// the opening naming file:line; a file edited during the run is an error naming it, never a wrong
// prompt.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"
#include "train/rl/prompt_dataset.h"

namespace ferry {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

class PromptFileTest : public ::testing::Test {
 protected:
  PromptFileTest()
      : tokenizer_(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model"), chat_(load_chat_template("demo")) {}

  std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path dir = ferry::test_support::process_scratch_dir("ferry_rl_prompt_file");
    std::filesystem::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::vector<int64_t> rendered(const Conversation& conversation) const {
    return chat_.render_prompt(conversation, tokenizer_);
  }

  Tokenizer tokenizer_;
  ChatTemplate chat_;
};

const std::string kLongQuestion(600, 'x');

TEST_F(PromptFileTest, LoadsWhatTheTemplateRendersAndKeepsLineNumbers) {
  const std::string path = write(
      "mixed.jsonl",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2+3?\"}], \"gt_answer\": \"5\", \"kind\": \"add\"}\n"
      "\n"
      "{\"prompt\": \"" + kLongQuestion + "\"}\n"
      "{\"prompt\": \"Say hi\"}\n"
      "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"7*6?\"}], "
      "\"gt_answer\": 42}");  // no final newline
  std::ostringstream log;
  const rl::PromptFile file(path, tokenizer_, chat_, {.max_length = 64}, log);
  ASSERT_EQ(file.size(), 3u);
  EXPECT_EQ(file.with_answer(), 2);
  EXPECT_CONTAINS(log.str(), "skipped 1 prompts of 64+ tokens");

  const rl::LoadedPrompts loaded = file.load({2, 0, 2});
  ASSERT_EQ(loaded.size(), 2u);
  const rl::RolloutPrompt& first = loaded.at(0);
  EXPECT_EQ(first.ids, rendered({ChatMessage{ChatRole::user, "What is 2+3?"}}));
  EXPECT_EQ(first.text, "What is 2+3?");
  EXPECT_EQ(first.gt_answer, "5");
  EXPECT_EQ(first.kind, "add");
  EXPECT_EQ(first.line, 1);
  const rl::RolloutPrompt& last = loaded.at(2);
  EXPECT_EQ(last.ids, rendered({ChatMessage{ChatRole::system, "Be brief."}, ChatMessage{ChatRole::user, "7*6?"}}));
  EXPECT_EQ(last.gt_answer, "42");
  EXPECT_EQ(last.line, 5);

  const std::vector<rl::RolloutPrompt> all = file.load_all();
  ASSERT_EQ(all.size(), 3u);
  // A text prompt is TRL's standard prompt-only row: tokenizer(text), no chat template.
  EXPECT_EQ(all[1].ids, tokenizer_.encode_as_sequence("Say hi"));
  EXPECT_FALSE(all[1].conversational);
  EXPECT_EQ(all[1].text, "Say hi");
  EXPECT_EQ(all[1].line, 4);
  EXPECT_TRUE(all[1].gt_answer.empty());
}

TEST_F(PromptFileTest, MaxSamplesKeepsTheFirstPrompts) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += "{\"prompt\": \"q" + std::to_string(i) + "\"}\n";
  std::ostringstream log;
  const rl::PromptFile file(write("ten.jsonl", text), tokenizer_, chat_, {.max_samples = 4}, log);
  ASSERT_EQ(file.size(), 4u);
  EXPECT_EQ(file.load({3}).at(3).text, "q3");
}

TEST_F(PromptFileTest, BadLinesStopTheOpeningOrAreSkipped) {
  const std::string path = write("bad.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": 7}\n{\"prompt\": \"fine\"}\n");
  std::ostringstream log;
  try {
    rl::PromptFile file(path, tokenizer_, chat_, {}, log);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), path + ":2:");
    EXPECT_CONTAINS(e.what(), "data.skip_bad_lines");
  }
  const rl::PromptFile skipping(path, tokenizer_, chat_, {.skip_bad_lines = true}, log);
  ASSERT_EQ(skipping.size(), 2u);
  EXPECT_EQ(skipping.load({1}).at(1).text, "fine");
  EXPECT_EQ(skipping.load({1}).at(1).line, 3);
  EXPECT_CONTAINS(log.str(), "skipped 1 malformed lines");
}

TEST_F(PromptFileTest, AFileChangedDuringTheRunIsAnError) {
  const std::string path = write("edited.jsonl", "{\"prompt\": \"one\"}\n{\"prompt\": \"two\"}\n");
  std::ostringstream log;
  const rl::PromptFile file(path, tokenizer_, chat_, {}, log);
  write("edited.jsonl", "{\"prompt\": \"one, now longer than before\"}\n{\"prompt\": \"two\"}\n");
  try {
    (void)file.load({1});
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), path + ": the file changed");
  }
  write("edited.jsonl", "{\"prompt\": \"one\"}\n");
  try {
    (void)file.load({1});
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), path + ": the file changed");
  }
}

TEST_F(PromptFileTest, NoUsablePromptIsAnError) {
  std::ostringstream log;
  EXPECT_THROW(rl::PromptFile(write("empty.jsonl", "\n\n"), tokenizer_, chat_, {}, log), InputError);
  EXPECT_THROW(rl::PromptFile("", tokenizer_, chat_, {}, log), ConfigError);
}

}  // namespace
}  // namespace ferry
