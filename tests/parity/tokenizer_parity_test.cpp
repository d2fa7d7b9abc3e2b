// Ferry's tokenizer (Debian's libsentencepiece) against the Python sentencepiece package, and
// Ferry's chat templates against an independent rendering (tests/parity/tokenizer_ref.py):
// demo conversations encoded as one string with masks from byte offsets, Llama-2-chat as Meta's
// reference code encodes it, and the official Llama-2-chat and ChatML Jinja templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

const nlohmann::json& cases() {
  static const nlohmann::json json =
      nlohmann::json::parse(read_file(std::string(FERRY_FIXTURES_DIR) + "/tokenizer/cases.json"));
  return json;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

Conversation to_conversation(const nlohmann::json& messages) {
  Conversation out;
  for (const auto& m : messages) {
    out.push_back({chat_role_from_string(m["role"].get<std::string>()), m["content"].get<std::string>()});
  }
  return out;
}

const std::string kTemplates = std::string(FERRY_SOURCE_DIR) + "/configs/templates/";

TEST(TokenizerParity, EncodeDecodeMatchPythonSentencePiece) {
  for (const auto& tok : cases()["tokenizers"]) {
    const Tokenizer tokenizer(tok["model"].get<std::string>());
    for (const auto& c : tok["cases"]) {
      const std::string text = from_hex(c["text_hex"]);
      SCOPED_TRACE(tok["model"].get<std::string>() + " text: '" + text + "'");
      const auto expected = c["ids"].get<std::vector<int64_t>>();
      const auto ids = tokenizer.encode(text);
      EXPECT_EQ(ids, expected);
      std::vector<std::string> pieces;
      for (const int64_t id : expected) pieces.push_back(tokenizer.id_to_piece(id));
      EXPECT_EQ(pieces, c["pieces"].get<std::vector<std::string>>());
      EXPECT_EQ(tokenizer.decode(expected), from_hex(c["decoded_hex"]));
    }
  }
}

TEST(TokenizerParity, DecodeRepairsInvalidUtf8AsPythonDoes) {
  const auto& demo = cases()["tokenizers"][0];
  const Tokenizer tokenizer(demo["model"].get<std::string>());
  for (const auto& c : demo["decode_cases"]) {
    SCOPED_TRACE(c["ids"].dump());
    EXPECT_EQ(tokenizer.decode(c["ids"].get<std::vector<int64_t>>()), from_hex(c["decoded_hex"]));
  }
}

TEST(TokenizerParity, DemoTokenizerRoundTripsValidUtf8Exactly) {
  // Identity normalisation and byte fallback: decode(encode(text)) == text for valid UTF-8 that
  // does not itself contain U+2581 "▁", SentencePiece's space marker, which decodes as a space
  // (in Python too; EncodeDecodeMatchPythonSentencePiece checks that case against Python).
  const auto& demo = cases()["tokenizers"][0];
  const Tokenizer tokenizer(demo["model"].get<std::string>());
  for (const auto& c : demo["cases"]) {
    const std::string text = from_hex(c["text_hex"]);
    if (!c["valid_utf8"].get<bool>()) continue;
    if (text.find("\u2581") != std::string::npos) continue;
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  }
}

TEST(TokenizerParity, DemoTemplateIdsAndMasksMatchWholeStringEncoding) {
  const Tokenizer tokenizer(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model");
  const ChatTemplate demo = load_chat_template(kTemplates + "demo.yaml");
  for (const auto& c : cases()["conversations"]) {
    const Conversation conversation = to_conversation(c["messages"]);
    SCOPED_TRACE(from_hex(c["text_hex"]));
    EXPECT_EQ(demo.render_text(conversation), from_hex(c["text_hex"]));
    const auto tokenized = demo.apply(conversation, tokenizer);
    EXPECT_EQ(tokenized.ids, c["ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(tokenized.loss_mask, c["mask"].get<std::vector<uint8_t>>());
    EXPECT_EQ(tokenized.round_ends, c["round_ends"].get<std::vector<size_t>>());
  }
}

TEST(TokenizerParity, Llama2TokensAndMasksMatchMetasReferenceEncoding) {
  // A tokenizer with Llama's normaliser (dummy prefix): `tokenization: whole` must give the ids
  // of Meta's whole-string encoding, with the loss on the tokens that own answer bytes.
  const auto& llama2 = cases()["llama2"];
  const Tokenizer tokenizer(llama2["model"].get<std::string>());
  const ChatTemplate tmpl = load_chat_template(kTemplates + "llama2.yaml");
  for (const auto& c : llama2["cases"]) {
    Conversation conversation = to_conversation(c["messages"]);
    SCOPED_TRACE(tmpl.render_text(conversation, conversation.back().role == ChatRole::user));
    if (conversation.back().role == ChatRole::user) {
      EXPECT_EQ(tmpl.render_prompt(conversation, tokenizer), c["prompt_ids"].get<std::vector<int64_t>>());
      conversation.pop_back();
    }
    const auto tokenized = tmpl.apply(conversation, tokenizer);
    EXPECT_EQ(tokenized.ids, c["ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(tokenized.loss_mask, c["mask"].get<std::vector<uint8_t>>());
    EXPECT_EQ(tokenized.round_ends, c["round_ends"].get<std::vector<size_t>>());
  }
}

TEST(TokenizerParity, Llama2AndChatmlRenderAsTheOfficialJinjaTemplates) {
  for (const auto& r : cases()["renders"]) {
    const ChatTemplate tmpl = load_chat_template(kTemplates + r["template"].get<std::string>() + ".yaml");
    const Conversation conversation = to_conversation(r["messages"]);
    SCOPED_TRACE(r["template"].get<std::string>() + ": " + r["text"].get<std::string>());
    EXPECT_EQ(tmpl.render_text(conversation, r["generation_prompt"].get<bool>()), r["text"].get<std::string>());
  }
}

}  // namespace
}  // namespace ferry
