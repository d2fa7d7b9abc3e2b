// Loss masks of models' own chat templates against transformers (tests/parity/data_chat_template_masks_ref.py):
// every template of the corpus in tests/data/chat-templates (52 published models' templates) and 2
// synthetic templates with {% generation %} blocks, on conversations with a system message, two rounds, tool use (tools,
// tool_calls, tool results) and reasoning_content, tokenised by a byte-level BPE tokenizer.json:
//   - a conversation transformers refuses (the template raises) is an InputError here;
//   - otherwise the ids equal apply_chat_template(tokenize=True)'s, and the loss mask equals
//     transformers' return_assistant_tokens_mask (generation templates) or the tokens overlapping
//     each assistant turn and its end-of-turn text as found by rendering prefixes with transformers;
//   - a conversation with no turn to train on is an InputError naming the template file.
// The tool schema and tool call keys are not in sorted order: read as Ferry reads data (key order
// kept), a template's `tojson` writes them as transformers does.
// The test counts what it covered exactly: every corpus template, the synthetic ones, and how many
// conversations rendered, were refused or had no turn to train on (transformers 5.24's outcomes):
// a template or conversation the reference silently dropped fails it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "src/data/conversation_json.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/chat_template_corpus.h"

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/data_chat_template_masks/";

TEST(JinjaMasksParity, EveryCorpusTemplateMasksAsTransformers) {
  const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(read_file(kFixtures + "cases.json"));
  const Tokenizer tokenizer(kFixtures + "tokenizer");
  const auto& conversations = cases["conversations"];
  int rendered = 0, ids_equal = 0, masks_equal = 0, refused = 0, generation = 0, no_span = 0;
  std::vector<std::string> corpus;  // file names of the corpus templates covered
  size_t synthetic = 0;
  for (const auto& t : cases["templates"]) {
    if (t["source"].get<std::string>() == "corpus") {
      corpus.push_back(t["name"].get<std::string>() + ".jinja");
    } else {
      ++synthetic;
    }
    EXPECT_EQ(t["cases"].size(), conversations.size()) << t["name"];
    const ChatTemplate tmpl = resolve_chat_template(t["file"].get<std::string>(), tokenizer);
    for (size_t k = 0; k < t["cases"].size(); ++k) {
      const auto& expected = t["cases"][k];
      const nlohmann::ordered_json& line = conversations[k];
      SCOPED_TRACE(t["name"].get<std::string>() + ": " + expected["note"].get<std::string>());
      const Conversation conversation = conversation_from_json(line, "messages");
      const ChatContext context = chat_context_from_json(line);
      if (expected["error"].get<bool>() || expected["no_span"].get<bool>()) {
        try {
          tmpl.apply(conversation, tokenizer, context);
          ADD_FAILURE() << "transformers refuses this conversation, or it has no turn to train on";
        } catch (const InputError& e) {
          const std::string message = e.what();
          EXPECT_NE(message.find(t["file"].get<std::string>()), std::string::npos) << message;
        }
        ++(expected["error"].get<bool>() ? refused : no_span);
        continue;
      }
      ++rendered;
      generation += expected["generation"].get<bool>() ? 1 : 0;
      EXPECT_EQ(tmpl.render_text(conversation, false, context), expected["text"].get<std::string>());
      const TokenizedConversation tokenized = tmpl.apply(conversation, tokenizer, context);
      EXPECT_EQ(tokenized.ids, expected["ids"].get<std::vector<int64_t>>());
      EXPECT_EQ(tokenized.loss_mask, expected["mask"].get<std::vector<uint8_t>>());
      ids_equal += tokenized.ids == expected["ids"].get<std::vector<int64_t>>() ? 1 : 0;
      masks_equal += tokenized.loss_mask == expected["mask"].get<std::vector<uint8_t>>() ? 1 : 0;
      // Round ends grow and the last is the whole conversation.
      ASSERT_FALSE(tokenized.round_ends.empty());
      EXPECT_TRUE(std::is_sorted(tokenized.round_ends.begin(), tokenized.round_ends.end()));
      EXPECT_EQ(tokenized.round_ends.back(), tokenized.ids.size());
    }
  }
  std::cout << "jinja masks: " << cases["templates"].size() << " templates (" << corpus.size()
            << " real from tests/data/chat-templates, " << synthetic << " synthetic) x " << conversations.size()
            << " conversations; " << rendered << " conversations rendered ("
            << generation << " with {% generation %}): ids equal " << ids_equal << "/" << rendered << ", masks equal "
            << masks_equal << "/" << rendered << "; " << refused << " refused by the template, " << no_span
            << " without a trainable turn\n";
  std::sort(corpus.begin(), corpus.end());
  EXPECT_EQ(corpus, test_support::chat_template_corpus_files());
  EXPECT_EQ(corpus.size(), test_support::kCorpusTemplates);
  EXPECT_EQ(synthetic, 2u);  // data_chat_template_masks_ref.py's GENERATION_TEMPLATES
  EXPECT_EQ(conversations.size(), 4u);
  // (52 + 2) x 4 = 216 conversations, each counted once below.
  EXPECT_EQ(rendered, 170);
  EXPECT_EQ(refused, 41);
  EXPECT_EQ(no_span, 5);
  EXPECT_EQ(generation, 12);  // conversations masked by {% generation %} (synthetic and corpus templates)
}

}  // namespace
}  // namespace ferry
