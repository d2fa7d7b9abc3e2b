// Chat templates against the real Hugging Face ones (tests/parity/tokenizer_chat_templates_ref.py):
// for every Jinja template in configs/templates/jinja (Llama 3 / 3.1 / 3.2, Qwen2, Qwen2.5, SmolLM2,
// Mistral v0.2) and a model folder like the family's (trained byte-level BPE tokenizer.json, or a
// SentencePiece tokenizer.model for Mistral) holding that template, with and without a system
// message, one and three rounds, whitespace around and inside messages, generation prompts:
//   - `auto` (the folder's own template, rendered by ferry::jinja) gives transformers'
//     apply_chat_template text and ids (tokenize=True), the loss mask on the tokens overlapping
//     each answer (with any space the template writes before it) and its end marker, and the
//     round ends;
//   - the shipped YAML template that reproduces it (the BOS token's text in front where the
//     template writes BOS) gives the same text, ids, mask and round ends;
//   - both leave a conversation's final answer open as apply_chat_template(continue_final_message=True)
//     does (text and ids);
//   - SentencePiece folders put "▁" after special tokens as transformers' tokenizer does with
//     tokenizer_config.json's legacy true, false and absent, and add_prefix_space false.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/file_util.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

const nlohmann::json& cases() {
  static const nlohmann::json json =
      nlohmann::json::parse(read_file(std::string(FERRY_FIXTURES_DIR) + "/tokenizer_chat_templates/cases.json"));
  return json;
}

Conversation to_conversation(const nlohmann::json& messages) {
  Conversation out;
  for (const auto& m : messages) out.push_back({chat_role_from_string(m["role"].get<std::string>()), m["content"]});
  return out;
}

// Llama 3.2's template writes today's date unless given date_string, as the reference was.
ChatTemplate folder_template(const Tokenizer& tokenizer) {
  return resolve_chat_template("auto", tokenizer, nlohmann::ordered_json{{"date_string", cases()["date_string"]}});
}

// One Jinja template's model folder by the Jinja file's stem (fixed here: tests are listed before
// the fixtures exist; FixtureCoversEveryShippedJinjaTemplate keeps the list complete).
class ChatTemplateParity : public ::testing::TestWithParam<std::string> {
 protected:
  const nlohmann::json& folder() const {
    for (const auto& f : cases()["folders"]) {
      if (f["model"] == GetParam()) return f;
    }
    throw std::runtime_error("no folder '" + GetParam() + "' in cases.json");
  }
};

TEST_P(ChatTemplateParity, AutoRendersTheFoldersTemplateAsTransformers) {
  const auto& f = folder();
  const Tokenizer tokenizer(f["folder"].get<std::string>());
  const ChatTemplate tmpl = folder_template(tokenizer);
  ASSERT_TRUE(tmpl.jinja);
  EXPECT_FALSE(tmpl.bos);
  for (const auto& c : f["cases"]) {
    const Conversation conversation = to_conversation(c["messages"]);
    const bool generation_prompt = c["generation_prompt"].get<bool>();
    SCOPED_TRACE(c["note"].get<std::string>() + ": " + c["text"].get<std::string>());
    EXPECT_EQ(tmpl.render_text(conversation, generation_prompt), c["text"].get<std::string>());
    if (c.contains("continued_text")) {
      EXPECT_EQ(tmpl.render_text(conversation, RenderEnd::continue_final_message), c["continued_text"].get<std::string>());
      EXPECT_EQ(tmpl.render_prompt(conversation, tokenizer, {}, RenderEnd::continue_final_message),
                c["continued_ids"].get<std::vector<int64_t>>());
    }
    const auto ids = c["jinja_ids"].get<std::vector<int64_t>>();
    if (generation_prompt) {
      EXPECT_EQ(tmpl.render_prompt(conversation, tokenizer), ids);
      continue;
    }
    const TokenizedConversation tokenized = tmpl.apply(conversation, tokenizer);
    EXPECT_EQ(tokenized.ids, ids);
    EXPECT_EQ(tokenized.loss_mask, c["jinja_mask"].get<std::vector<uint8_t>>());
    EXPECT_EQ(tokenized.round_ends, c["round_ends"].get<std::vector<size_t>>());
  }
}

TEST_P(ChatTemplateParity, TextIdsMasksAndRoundsEqualTransformers) {
  const auto& f = folder();
  const Tokenizer tokenizer(f["folder"].get<std::string>());
  const ChatTemplate tmpl = load_chat_template(f["template"].get<std::string>());
  // BOS is a token, not text: its text stands in front where the template writes BOS as text.
  const std::string bos_text = tmpl.bos ? tokenizer.id_to_piece(tokenizer.bos_id()) : "";
  for (const auto& c : f["cases"]) {
    const Conversation conversation = to_conversation(c["messages"]);
    const bool generation_prompt = c["generation_prompt"].get<bool>();
    SCOPED_TRACE(c["note"].get<std::string>() + ": " + c["text"].get<std::string>());
    EXPECT_EQ(bos_text + tmpl.render_text(conversation, generation_prompt), c["ferry_text"].get<std::string>());
    if (c.contains("continued_text")) {
      EXPECT_EQ(bos_text + tmpl.render_text(conversation, RenderEnd::continue_final_message),
                c["continued_ferry_text"].get<std::string>());
      EXPECT_EQ(tmpl.render_prompt(conversation, tokenizer, {}, RenderEnd::continue_final_message),
                c["continued_ids"].get<std::vector<int64_t>>());
    }
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    if (generation_prompt) {
      EXPECT_EQ(tmpl.render_prompt(conversation, tokenizer), ids);
      continue;
    }
    const TokenizedConversation tokenized = tmpl.apply(conversation, tokenizer);
    EXPECT_EQ(tokenized.ids, ids);
    EXPECT_EQ(tokenized.loss_mask, c["mask"].get<std::vector<uint8_t>>());
    EXPECT_EQ(tokenized.round_ends, c["round_ends"].get<std::vector<size_t>>());
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateParity,
                         ::testing::Values("Meta-Llama-3-8B-Instruct", "Llama-3.1-8B-Instruct", "Llama-3.2-1B-Instruct",
                                           "Qwen2-7B-Instruct", "Qwen2.5-0.5B", "Qwen2.5-7B-Instruct",
                                           "SmolLM2-1.7B-Instruct", "Mistral-7B-Instruct-v0.2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return name;
                         });

TEST(ChatTemplateParity, FixtureCoversEveryShippedJinjaTemplate) {
  std::set<std::string> in_fixture;
  for (const auto& f : cases()["folders"]) in_fixture.insert(f["model"].get<std::string>());
  std::set<std::string> shipped;
  for (const auto& entry : fs::recursive_directory_iterator(std::string(FERRY_SOURCE_DIR) + "/configs/templates/jinja")) {
    if (entry.path().extension() == ".jinja") shipped.insert(entry.path().stem().string());
  }
  EXPECT_EQ(in_fixture, shipped);
  EXPECT_EQ(in_fixture.size(), 8u);  // the INSTANTIATE list above
}

TEST(ChatTemplateParity, ContinuedPromptsAreChecked) {
  int continued = 0;
  for (const auto& f : cases()["folders"]) {
    for (const auto& c : f["cases"]) continued += c.contains("continued_text") ? 1 : 0;
  }
  EXPECT_GE(continued, 8 * 8);  // every folder's conversations that end with an answer
  const Tokenizer tokenizer(cases()["folders"][0]["folder"].get<std::string>());
  const ChatTemplate tmpl = folder_template(tokenizer);
  // transformers raises for a final message that is not the assistant's (or has no content).
  try {
    tmpl.render_text({{ChatRole::user, "Hi"}}, RenderEnd::continue_final_message);
    ADD_FAILURE() << "a final user message was continued";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the last message must be the assistant's"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateParity, SentencePieceLegacySettingsEncodeAsTransformers) {
  int compared = 0;
  for (const auto& setting : cases()["legacy"]) {
    const Tokenizer tokenizer(setting["folder"].get<std::string>());
    for (size_t i = 0; i < setting["texts"].size(); ++i) {
      const std::string text = setting["texts"][i].get<std::string>();
      SCOPED_TRACE(setting["setting"].get<std::string>() + ": " + text);
      std::vector<int64_t> ids;
      for (const TokenSpan& span : tokenizer.encode_with_control_pieces_and_offsets(text)) {
        ids.push_back(span.id);
        EXPECT_LE(span.begin, span.end);
        EXPECT_LE(span.end, text.size());
      }
      EXPECT_EQ(ids, setting["ids"][i].get<std::vector<int64_t>>());
      ++compared;
    }
  }
  EXPECT_EQ(compared, 4 * 17);
}

TEST(ChatTemplateParity, AutoRendersAnEditedTemplateItDoesNotKnow) {
  // The Qwen2.5 folder's template with another default system prompt: rendered as written.
  const fs::path dir = fs::temp_directory_path() / ("ferry_chat_template_edit_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto& folders = cases()["folders"];
  const auto qwen = std::find_if(folders.begin(), folders.end(), [](const auto& f) { return f["model"] == "Qwen2.5-7B-Instruct"; });
  ASSERT_NE(qwen, folders.end());
  fs::copy((*qwen)["folder"].get<std::string>(), dir, fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(read_file((dir / "tokenizer_config.json").string()));
  std::string jinja = config["chat_template"].get<std::string>();
  const std::string prompt = "You are Qwen, created by Alibaba Cloud.";
  for (size_t at = jinja.find(prompt); at != std::string::npos; at = jinja.find(prompt, at + 1)) {
    jinja.replace(at, prompt.size(), "You are Qwen, made by Alibaba Cloud.");
  }
  config["chat_template"] = jinja;
  write_file_atomic(dir / "tokenizer_config.json", config.dump());
  const Tokenizer tokenizer(dir.string());
  const ChatTemplate tmpl = resolve_chat_template("auto", tokenizer);
  EXPECT_EQ(tmpl.source, (dir / "tokenizer_config.json").string());
  const std::string text = tmpl.render_text({{ChatRole::user, "Hi"}}, true);
  EXPECT_EQ(text, "<|im_start|>system\nYou are Qwen, made by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
