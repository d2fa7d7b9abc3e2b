// TRL prompt-only rows (GRPO's rollouts) read as TRL 1.16's GRPOTrainer reads them
// (tests/parity/data_trl_formats_ref.py: GRPOTrainer._tokenize_prompts), with the real SmolLM2-135M-Instruct
// tokenizer and chat template: a conversational prompt through the template with the generation
// prompt, a text prompt as tokenizer(text) with no template. Every column stays on the prompt's row
// (what reward commands receive).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/prompt_dataset.h"

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/data_trl_formats/";

TEST(TrlPrompts, PromptOnlyRowsTokeniseAsGrpoTrainer) {
  const nlohmann::json expected = nlohmann::json::parse(read_file(kFixtures + "expected.json"));
  if (expected.contains("skip")) GTEST_SKIP() << expected["skip"].get<std::string>();
  const Tokenizer tokenizer(kFixtures + "smollm2_tokenizer");
  const ChatTemplate chat = resolve_chat_template("auto", tokenizer);
  for (const char* name : {"prompts_text", "prompts_messages"}) {
    SCOPED_TRACE(name);
    std::ostringstream log;
    const rl::PromptFile file(kFixtures + name + ".jsonl", tokenizer, chat, {}, log);
    const std::vector<rl::RolloutPrompt> prompts = file.load_all();
    const auto& rows = expected[name]["rows"];
    ASSERT_EQ(prompts.size(), rows.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(prompts[i].ids, rows[i]["ids"].get<std::vector<int64_t>>()) << "row " << i;
      EXPECT_EQ(prompts[i].conversational, std::string(name) == "prompts_messages");
      EXPECT_TRUE(nlohmann::json::parse(prompts[i].source).contains("solution")) << prompts[i].source;
    }
  }
}

}  // namespace
}  // namespace ferry
