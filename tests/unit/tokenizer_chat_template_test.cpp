// Chat templates: exact renderings of the shipped templates, loss masks that cover exactly the
// assistant content and its end marker, round boundaries, and the errors for bad template files
// and badly ordered conversations. Expected ids are laid out by hand from the demo vocabulary
// (<s>=1 </s>=2 <|system|>=4 <|user|>=5 <|assistant|>=6 <|end|>=7 "\n"=8).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_path.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

const std::string kSource = FERRY_SOURCE_DIR;
const std::string kSystem = "You are a careful assistant. Reply with the answer only.";

const Tokenizer& demo_tokenizer() {
  static const Tokenizer tok(kSource + "/data/tokenizer.model");
  return tok;
}

ChatTemplate shipped(const std::string& name) {
  return load_chat_template(kSource + "/configs/templates/" + name + ".yaml");
}

std::vector<int64_t> cat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

fs::path scratch_file(const std::string& name, const std::string& text) {
  const fs::path dir = ferry::test_support::process_scratch_dir("ferry_template_test");
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

template <class E, class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

// --- The demo template: ids and masks -------------------------------------------------------

TEST(ChatTemplate, DemoIdsAndMaskForOneRound) {
  const Tokenizer& tok = demo_tokenizer();
  const Conversation conversation{
      {ChatRole::system, kSystem}, {ChatRole::user, "What is 2 + 2?"}, {ChatRole::assistant, "4"}};
  const auto out = shipped("demo").apply(conversation, tok);
  const int64_t four = tok.piece_to_id("4");
  const auto expected =
      cat({{1, 4, 8}, tok.encode(kSystem), {7, 8, 5, 8}, tok.encode("What is 2 + 2?"), {7, 8, 6, 8, four, 7}});
  EXPECT_EQ(out.ids, expected);
  std::vector<uint8_t> mask(expected.size(), 0);
  mask[mask.size() - 2] = 1;  // "4"
  mask[mask.size() - 1] = 1;  // <|end|>
  EXPECT_EQ(out.loss_mask, mask);
  EXPECT_EQ(out.round_ends, std::vector<size_t>{expected.size()});
  EXPECT_EQ(tok.decode(out.ids),
            "<|system|>\n" + kSystem + "<|end|>\n<|user|>\nWhat is 2 + 2?<|end|>\n<|assistant|>\n4<|end|>");
}

TEST(ChatTemplate, DemoMaskCoversEveryAssistantAnswerAndMarkerOnly) {
  const Tokenizer& tok = demo_tokenizer();
  const Conversation conversation{{ChatRole::user, "Sort: 5 2 9"},
                                  {ChatRole::assistant, "2 5 9"},
                                  {ChatRole::user, "Largest?"},
                                  {ChatRole::assistant, "9"}};
  const auto out = shipped("demo").apply(conversation, tok);
  ASSERT_EQ(out.ids.size(), out.loss_mask.size());
  // Masked tokens, in order, are exactly answer 1 + <|end|> + answer 2 + <|end|>.
  std::vector<int64_t> masked;
  for (size_t i = 0; i < out.ids.size(); ++i) {
    if (out.loss_mask[i]) masked.push_back(out.ids[i]);
  }
  EXPECT_EQ(masked, cat({tok.encode("2 5 9"), {7}, {tok.piece_to_id("9"), 7}}));
  const size_t first_round = 1 + 2 + tok.encode("Sort: 5 2 9").size() + 2 + 2 + tok.encode("2 5 9").size() + 1;
  EXPECT_EQ(out.round_ends, (std::vector<size_t>{first_round, out.ids.size()}));
  // The first round alone is what a one-round conversation gives.
  const auto first = out.first_rounds(1);
  const auto alone = shipped("demo").apply({conversation[0], conversation[1]}, tok);
  EXPECT_EQ(first.ids, alone.ids);
  EXPECT_EQ(first.loss_mask, alone.loss_mask);
  EXPECT_EQ(first.round_ends, alone.round_ends);
  EXPECT_THROW(out.first_rounds(3), InternalError);
}

TEST(ChatTemplate, EmptyAnswerStillTrainsTheEndMarker) {
  const auto out = shipped("demo").apply({{ChatRole::user, "Hi"}, {ChatRole::assistant, ""}}, demo_tokenizer());
  EXPECT_EQ(std::vector<int64_t>(out.ids.end() - 3, out.ids.end()), (std::vector<int64_t>{6, 8, 7}));
  EXPECT_EQ(std::count(out.loss_mask.begin(), out.loss_mask.end(), 1), 1);
  EXPECT_EQ(out.loss_mask.back(), 1);
}

TEST(ChatTemplate, PromptEndsWithTheAssistantPrefix) {
  const Tokenizer& tok = demo_tokenizer();
  const Conversation prompt{{ChatRole::system, kSystem}, {ChatRole::user, "What is 2 + 2?"}};
  const auto ids = shipped("demo").render_prompt(prompt, tok);
  const auto expected = cat({{1, 4, 8}, tok.encode(kSystem), {7, 8, 5, 8}, tok.encode("What is 2 + 2?"), {7, 8, 6, 8}});
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(shipped("demo").stop_token_ids(tok), (std::vector<int64_t>{2, 7}));
}

TEST(ChatTemplate, DefaultSystemFillsInOnlyWhenAbsent) {
  ChatTemplate t = shipped("demo");
  t.default_system = "Be brief.";
  EXPECT_EQ(t.render_text({{ChatRole::user, "Hi"}, {ChatRole::assistant, "Yo"}}),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>");
  EXPECT_EQ(t.render_text({{ChatRole::system, "Own."}, {ChatRole::user, "Hi"}, {ChatRole::assistant, "Yo"}}),
            "<|system|>\nOwn.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>");
}

TEST(ChatTemplate, UserTextThatSpellsControlPiecesStaysText) {
  const Tokenizer& tok = demo_tokenizer();
  const auto out = shipped("demo").apply({{ChatRole::user, "<s> and </s>"}, {ChatRole::assistant, "ok </s>"}}, tok);
  EXPECT_EQ(std::count(out.ids.begin(), out.ids.end(), int64_t{1}), 1);  // only the real BOS
  EXPECT_EQ(std::count(out.ids.begin(), out.ids.end(), int64_t{2}), 0);
}

// --- Llama-2-chat and ChatML: exact text, and token layout -----------------------------------

TEST(ChatTemplate, Llama2RendersSystemInsideTheFirstInst) {
  const ChatTemplate t = shipped("llama2");
  EXPECT_EQ(t.render_text({{ChatRole::system, "SYS"},
                           {ChatRole::user, "U1"},
                           {ChatRole::assistant, "A1"},
                           {ChatRole::user, "U2"},
                           {ChatRole::assistant, "A2"}}),
            "<s>[INST] <<SYS>>\nSYS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST] A2 </s>");
  EXPECT_EQ(t.render_text({{ChatRole::user, "U1"}, {ChatRole::assistant, "A1"}}), "<s>[INST] U1 [/INST] A1 </s>");
  EXPECT_EQ(t.render_text({{ChatRole::user, "U1"}}, /*generation_prompt=*/true), "<s>[INST] U1 [/INST]");
}

TEST(ChatTemplate, Llama2WritesBosPerRoundAndTrainsEos) {
  const Tokenizer& tok = demo_tokenizer();
  const auto out = shipped("llama2").apply(
      {{ChatRole::user, "U1"}, {ChatRole::assistant, "A1"}, {ChatRole::user, "U2"}, {ChatRole::assistant, "A2"}}, tok);
  EXPECT_EQ(out.ids.front(), 1);
  EXPECT_EQ(std::count(out.ids.begin(), out.ids.end(), int64_t{1}), 2);
  EXPECT_EQ(std::count(out.ids.begin(), out.ids.end(), int64_t{2}), 2);
  EXPECT_EQ(out.ids.back(), 2);
  EXPECT_EQ(out.loss_mask.back(), 1);
  EXPECT_EQ(out.ids[out.round_ends[0]], 1);  // the second round starts with its BOS
  std::vector<int64_t> masked;
  for (size_t i = 0; i < out.ids.size(); ++i) {
    if (out.loss_mask[i]) masked.push_back(out.ids[i]);
  }
  const int64_t space = tok.piece_to_id("▁");
  EXPECT_EQ(masked, cat({tok.encode("A1"), {space, 2}, tok.encode("A2"), {space, 2}}));
}

TEST(ChatTemplate, WholeTokenizationTrainsTokensThatOwnAnswerBytes) {
  // llama2 uses `tokenization: whole`: "[INST] U1 [/INST] the answer " is encoded at once, so
  // the prefix space and "the" become one token "▁the", trained because it owns answer bytes.
  const Tokenizer& tok = demo_tokenizer();
  const auto out = shipped("llama2").apply({{ChatRole::user, "U1"}, {ChatRole::assistant, "the answer"}}, tok);
  const auto expected = cat({{1}, tok.encode("[INST] U1 [/INST] the answer "), {2}});
  ASSERT_EQ(out.ids, expected);
  const std::vector<int64_t> trained{tok.piece_to_id("▁the"), tok.piece_to_id("▁answer"), tok.piece_to_id("▁"), 2};
  ASSERT_EQ(std::vector<int64_t>(out.ids.end() - 4, out.ids.end()), trained);
  std::vector<uint8_t> mask(expected.size(), 0);
  std::fill(mask.end() - 4, mask.end(), 1);
  EXPECT_EQ(out.loss_mask, mask);
  EXPECT_EQ(out.round_ends, std::vector<size_t>{expected.size()});
  // Piece by piece, the prefix space would be a token of its own, untrained.
  ChatTemplate pieces = shipped("llama2");
  pieces.tokenization = TemplateTokenization::pieces;
  const auto by_piece = pieces.apply({{ChatRole::user, "U1"}, {ChatRole::assistant, "the answer"}}, tok);
  EXPECT_NE(by_piece.ids, out.ids);
}

TEST(ChatTemplate, TokenizationKeyIsChecked) {
  const fs::path good = scratch_file("whole.yaml", "assistant_suffix: x\ntokenization: whole\n");
  EXPECT_EQ(load_chat_template(good.string()).tokenization, TemplateTokenization::whole);
  const fs::path bad = scratch_file("joined.yaml", "assistant_suffix: x\ntokenization: joined\n");
  EXPECT_CONTAINS(error_message<ConfigError>([&] { load_chat_template(bad.string()); }), "expected pieces or whole");
}

TEST(ChatTemplate, Llama2PromptEndsAtInstWithoutTheAnswerSpace) {
  const Tokenizer& tok = demo_tokenizer();
  const auto ids = shipped("llama2").render_prompt({{ChatRole::user, "U1"}}, tok);
  const auto close = tok.encode(" [/INST]");
  ASSERT_GE(ids.size(), close.size());
  EXPECT_EQ(std::vector<int64_t>(ids.end() - close.size(), ids.end()), close);
  EXPECT_EQ(ids.front(), 1);
  // Without generation_prefix the prompt ends with assistant_prefix.
  ChatTemplate t = shipped("llama2");
  t.generation_prefix.reset();
  EXPECT_EQ(t.render_text({{ChatRole::user, "U1"}}, true), "<s>[INST] U1 [/INST] ");
}

TEST(ChatTemplate, ChatmlRendersImStartBlocks) {
  const ChatTemplate t = shipped("chatml");
  EXPECT_EQ(t.render_text({{ChatRole::system, "S"}, {ChatRole::user, "U"}, {ChatRole::assistant, "A"}}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n");
  EXPECT_EQ(t.render_text({{ChatRole::user, "U"}}, true), "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(t.bos);
}

TEST(ChatTemplate, TrimStripsPythonWhitespaceAroundEveryMessage) {
  const ChatTemplate t = parse_chat_template(
      "system_prefix: \"S:\"\nuser_prefix: \"U:\"\nassistant_prefix: \"A:\"\nassistant_suffix: \"|\"\ntrim: true\n", "t.yaml");
  EXPECT_TRUE(t.trim);
  // Python's str.strip(): ASCII whitespace, U+001C..U+001F, U+00A0, U+3000, U+2028; not U+200B.
  const Conversation conversation{{ChatRole::system, " \t s \n"},
                                  {ChatRole::user, "\x1c\u00a0u  v\u3000"},
                                  {ChatRole::assistant, "\n\u2028a\u200b\r\n"}};
  EXPECT_EQ(t.render_text(conversation), "S:sU:u  vA:a\u200b|");
  EXPECT_EQ(t.render_text({{ChatRole::user, "   "}, {ChatRole::assistant, " \n "}}), "U:A:|");
  // The mask follows the trimmed text: the answer is its content only.
  const auto out = t.apply({{ChatRole::user, " x "}, {ChatRole::assistant, "  4  "}}, demo_tokenizer());
  const Tokenizer& tok = demo_tokenizer();
  const auto answer = cat({tok.encode("4"), tok.encode("|")});
  EXPECT_EQ(out.ids, cat({{1}, tok.encode("U:"), tok.encode("x"), tok.encode("A:"), answer}));
  EXPECT_EQ(std::count(out.loss_mask.begin(), out.loss_mask.end(), 1), static_cast<long>(answer.size()));
  // Without trim, whitespace stays.
  EXPECT_EQ(shipped("chatml").render_text({{ChatRole::user, " u "}, {ChatRole::assistant, " a\n"}}),
            "<|im_start|>user\n u <|im_end|>\n<|im_start|>assistant\n a\n<|im_end|>\n");
}

TEST(ChatTemplate, AlwaysSystemRendersTheSystemBlockWithoutASystemMessage) {
  const ChatTemplate t = shipped("llama3.1");
  EXPECT_TRUE(t.always_system);
  const std::string header =
      "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  EXPECT_EQ(t.render_text({{ChatRole::user, "Hi"}}, true),
            header + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(t.render_text({{ChatRole::system, " Be brief. "}, {ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello"}}),
            header + "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>");
  // Llama 3 (3.0) has no system block without a system message.
  EXPECT_EQ(shipped("llama3").render_text({{ChatRole::user, "Hi"}}, true),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  const ChatTemplate off = parse_chat_template("assistant_suffix: x\nalways_system: false\ntrim: false\n", "t.yaml");
  EXPECT_FALSE(off.always_system);
  EXPECT_FALSE(off.trim);
  EXPECT_CONTAINS(error_message<ConfigError>([] { parse_chat_template("assistant_suffix: x\ntrim: maybe\n", "t.yaml"); }),
                  "trim: expected true or false");
}

TEST(ChatTemplate, MistralPutsTheSystemMessageInTheFirstTurnOnly) {
  const ChatTemplate t = shipped("mistral");
  EXPECT_EQ(t.render_text({{ChatRole::system, "S"}, {ChatRole::user, "U1"}, {ChatRole::assistant, "A1"},
                           {ChatRole::user, "U2"}},
                          true),
            "[INST] S\n\nU1 [/INST] A1</s>[INST] U2 [/INST]");
  EXPECT_TRUE(t.bos);
  EXPECT_EQ(t.tokenization, TemplateTokenization::whole);
}

// --- Finding and parsing template files ------------------------------------------------------

TEST(ChatTemplate, ShippedNamesResolve) {
  for (const std::string name : {"demo", "llama2", "chatml", "llama3", "llama3.1", "llama3.2", "qwen2", "qwen2.5",
                                 "smollm2", "mistral"}) {
    const ChatTemplate t = load_chat_template(name);
    EXPECT_EQ(t.name, name);
    EXPECT_TRUE(fs::exists(t.source)) << t.source;
  }
  const std::string message = error_message<ConfigError>([] { load_chat_template("demoo"); });
  EXPECT_CONTAINS(message, "did you mean 'demo'");
  EXPECT_CONTAINS(message, "llama2");
}

TEST(ChatTemplate, FerryTemplatesFolderComesFirst) {
  const fs::path file = scratch_file("demo.yaml", "name: mine\nassistant_suffix: \"</s>\"\n");
  ::setenv("FERRY_TEMPLATES", file.parent_path().c_str(), 1);
  const ChatTemplate t = load_chat_template("demo");
  ::unsetenv("FERRY_TEMPLATES");
  EXPECT_EQ(t.name, "mine");
  EXPECT_EQ(load_chat_template("demo").name, "demo");
}

TEST(ChatTemplate, JsonTemplatesWork) {
  const fs::path file = scratch_file("t.json",
                                     R"({"user_prefix": "U:", "assistant_prefix": "A:", "assistant_suffix": "</s>",
                                        "stop_strings": ["</s>", "\n\n"], "bos": false})");
  const ChatTemplate t = load_chat_template(file.string());
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.stop_strings, (std::vector<std::string>{"</s>", "\n\n"}));
  EXPECT_EQ(t.render_text({{ChatRole::user, "x"}, {ChatRole::assistant, "y"}}), "U:xA:y</s>");
  const auto out = t.apply({{ChatRole::user, "x"}, {ChatRole::assistant, "y"}}, demo_tokenizer());
  EXPECT_EQ(out.ids.back(), 2);  // "</s>" in a template string is EOS
  EXPECT_NE(out.ids.front(), 1);
}

TEST(ChatTemplate, UnknownKeyNamesFileLineAndSuggestion) {
  const fs::path file = scratch_file("typo.yaml", "name: x\nassistant_suffix: \"</s>\"\nasistant_prefix: \"A:\"\n");
  const std::string message = error_message<ConfigError>([&] { load_chat_template(file.string()); });
  EXPECT_CONTAINS(message, file.string() + ":3");
  EXPECT_CONTAINS(message, "asistant_prefix");
  EXPECT_CONTAINS(message, "did you mean 'assistant_prefix'");
}

TEST(ChatTemplate, BadTemplateFilesAreConfigErrors) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"not_a_map.yaml", "- a\n- b\n"},
      {"bad_yaml.yaml", "name: [unclosed\n"},
      {"bad_bool.yaml", "assistant_suffix: x\nbos: maybe\n"},
      {"bad_list.yaml", "assistant_suffix: x\nstop_strings: {a: b}\n"},
      {"map_value.yaml", "assistant_suffix: {a: b}\n"},
      {"no_suffix.yaml", "name: x\nuser_prefix: U\n"},
      {"empty.yaml", ""},
  };
  for (const auto& [name, text] : bad) {
    const fs::path file = scratch_file(name, text);
    const std::string message = error_message<ConfigError>([&] { load_chat_template(file.string()); });
    EXPECT_CONTAINS(message, name);
  }
  EXPECT_CONTAINS(error_message<ConfigError>([] { load_chat_template("/nonexistent/t.yaml"); }),
                  "/nonexistent/t.yaml");
  EXPECT_CONTAINS(error_message<ConfigError>([&] { load_chat_template("bad_bool"); }), "bad_bool");
}

// --- Conversation order -----------------------------------------------------------------------

TEST(ChatTemplate, BadConversationsAreInputErrorsSayingWhichMessage) {
  const ChatTemplate t = shipped("demo");
  const Tokenizer& tok = demo_tokenizer();
  auto apply_error = [&](const Conversation& c) { return error_message<InputError>([&] { t.apply(c, tok); }); };
  EXPECT_CONTAINS(apply_error({}), "no messages");
  EXPECT_CONTAINS(apply_error({{ChatRole::system, "s"}}), "only a system message");
  EXPECT_CONTAINS(apply_error({{ChatRole::assistant, "a"}}), "message 1 (assistant): expected a user message first");
  EXPECT_CONTAINS(apply_error({{ChatRole::system, "s"}, {ChatRole::assistant, "a"}}),
                  "message 2 (assistant): expected a user message after the system message");
  EXPECT_CONTAINS(apply_error({{ChatRole::user, "u"}, {ChatRole::user, "u"}, {ChatRole::assistant, "a"}}),
                  "message 2 (user): expected an assistant message after message 1 (user)");
  EXPECT_CONTAINS(apply_error({{ChatRole::user, "u"}, {ChatRole::system, "s"}, {ChatRole::assistant, "a"}}),
                  "message 2 (system): a system message may only come first");
  EXPECT_CONTAINS(apply_error({{ChatRole::user, "u"}, {ChatRole::assistant, "a"}, {ChatRole::user, "u"}}),
                  "must end with the assistant");
  EXPECT_CONTAINS(error_message<InputError>([&] {
                    t.render_prompt({{ChatRole::user, "u"}, {ChatRole::assistant, "a"}}, tok);
                  }),
                  "must end with a user message");
}

TEST(ChatTemplate, RoleNamesAndAliases) {
  EXPECT_EQ(chat_role_from_string("human"), ChatRole::user);
  EXPECT_EQ(chat_role_from_string("gpt"), ChatRole::assistant);
  EXPECT_EQ(parse_chat_role("System"), std::nullopt);
  EXPECT_CONTAINS(error_message<InputError>([] { chat_role_from_string("bot"); }), "'bot'");
  EXPECT_STREQ(chat_role_name(ChatRole::assistant), "assistant");
}

}  // namespace
}  // namespace ferry
