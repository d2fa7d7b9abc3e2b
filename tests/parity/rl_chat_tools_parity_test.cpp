// A line's `tools` reach the chat template wherever Ferry renders chats, not only in train-sft
// (tests/parity/data_chat_template_masks_ref.py, tool_lines): with Qwen2.5's template and Hermes 3's
// tool_use template, on a byte-level BPE tokenizer.json, and tool schemas whose keys are not sorted,
//   - a preference pair (train-dpo, train-rm, ferry score) tokenises prompt + chosen and prompt +
//     rejected to the ids of transformers' apply_chat_template(..., tools=...), with no loss on the
//     tokens the prompt shares with them (its tool call included); Hermes 3's template, which
//     rewrites the last tool result once answered, leaves no response to train on: an InputError;
//   - an RL prompt file line (train-ppo, train-grpo; ferry eval reads prompts the same way) renders
//     to apply_chat_template(messages, tools=..., add_generation_prompt=True)'s ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "src/data/preference_dataset.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/prompt_dataset.h"

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/data_chat_template_masks/";

TEST(ChatToolsParity, PreferencePairsAndRlPromptsRenderTheirTools) {
  const nlohmann::json cases = nlohmann::json::parse(read_file(kFixtures + "cases.json"));
  const Tokenizer tokenizer(kFixtures + "tokenizer");
  ASSERT_EQ(cases["tool_lines"].size(), 2u);
  for (const auto& t : cases["tool_lines"]) {
    SCOPED_TRACE(t["name"].get<std::string>());
    const ChatTemplate tmpl = resolve_chat_template(t["file"].get<std::string>(), tokenizer);
    std::ostringstream log;
    const rl::PromptFile prompts(kFixtures + "prompts.jsonl", tokenizer, tmpl, {}, log);
    const std::vector<rl::RolloutPrompt> loaded = prompts.load_all();
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded[0].ids, t["rl_prompt"].get<std::vector<int64_t>>());
    EXPECT_EQ(loaded[0].gt_answer, "7");

    if (t["name"] == "hermes3") {
      // Hermes 3 writes the last tool result differently once an answer follows ("\n<|im_end|>"). The
      // line is a TRL row: trained from where the prompt's ids and prompt + response's part, as TRL's
      // DPO trainer does (it warns), and counted in the summary.
      const PreferenceDataset pairs = load_preference_dataset(kFixtures + "pairs.jsonl", tokenizer, tmpl, 4096, false);
      ASSERT_EQ(pairs.pairs.size(), 1u);
      EXPECT_EQ(pairs.stats.prompt_diverged, 1);
      EXPECT_NE(pairs.stats.summary().find("renders differently once answered"), std::string::npos);
      continue;
    }
    const PreferenceDataset pairs = load_preference_dataset(kFixtures + "pairs.jsonl", tokenizer, tmpl, 4096, false);
    ASSERT_EQ(pairs.pairs.size(), 1u);
    const PreferencePair& pair = pairs.pairs[0];
    EXPECT_EQ(pair.chosen.ids, t["chosen"].get<std::vector<int64_t>>());
    EXPECT_EQ(pair.rejected.ids, t["rejected"].get<std::vector<int64_t>>());
    const auto shared = static_cast<std::ptrdiff_t>(t["prompt_tokens"].get<size_t>());
    for (const TokenizedSample* sample : {&pair.chosen, &pair.rejected}) {
      ASSERT_GT(sample->loss_mask.size(), static_cast<size_t>(shared));
      EXPECT_EQ(std::count(sample->loss_mask.begin(), sample->loss_mask.begin() + shared, uint8_t{1}), 0);
      EXPECT_GT(std::count(sample->loss_mask.begin() + shared, sample->loss_mask.end(), uint8_t{1}), 0);
    }
  }
}

}  // namespace
}  // namespace ferry
