// A model's own (Jinja) chat template in Ferry's data path: conversations with tool turns (order
// rule, JSON fields passed through as transformers passes them), template resolution (auto,
// jinja:NAME, .jinja files, keywords), loss spans of templates that rewrite earlier turns, and the
// errors a user sees (file:line:column, no turn to train on, tools for a YAML template).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/jinja/template_error.h"
#include "src/tokenizer/jinja_chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ferry {
namespace {

const std::string kSource = FERRY_SOURCE_DIR;

// The demo tokenizer in a folder with a tokenizer_config.json holding `config`.
fs::path folder_with(const std::string& name, const json& config) {
  const fs::path dir = test_support::process_scratch_dir("ferry_chat_jinja") / name;
  fs::create_directories(dir);
  fs::copy_file(kSource + "/data/tokenizer.model", dir / "tokenizer.model", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir;
}

const char* kEcho =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% if m.role == 'assistant' %}{{ eos_token }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

Conversation parse(const std::string& messages) { return conversation_from_json(json::parse(messages), "messages"); }

TEST(ChatJinja, ToolTurnsFollowTheOrderRule) {
  const Conversation ok = parse(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
      {"role": "tool", "content": "1", "tool_call_id": "c"}, {"role": "tool", "content": "2"},
      {"role": "assistant", "content": "a"}]})");
  EXPECT_NO_THROW(check_conversation(ok, ConversationEnd::assistant));
  EXPECT_NO_THROW(check_conversation(Conversation(ok.begin(), ok.end() - 1), ConversationEnd::user));
  EXPECT_TRUE(has_tool_messages(ok));
  EXPECT_FALSE(ok[1].content_given);
  auto error = [](const Conversation& c) {
    try {
      check_conversation(c, ConversationEnd::assistant);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(parse(R"({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "1"},
      {"role": "assistant", "content": "a"}]})")).find("message 2 (tool): a tool message must follow an assistant "
                                                       "message with tool_calls"), std::string::npos);
  EXPECT_NE(error(parse(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"},
      {"role": "tool", "content": "1"}, {"role": "assistant", "content": "a"}]})")).find("message 3 (tool)"),
            std::string::npos);
  EXPECT_THROW(parse(R"({"messages": [{"role": "user"}]})"), InputError);
  EXPECT_THROW(parse(R"({"messages": [{"role": "user", "content": "q", "tool_calls": []}]})"), InputError);
}

TEST(ChatJinja, MessagesReachTheTemplateAsTransformersPassesThem) {
  const Conversation c = parse(R"({"messages": [{"from": "human", "content": "q", "name": null},
      {"role": "assistant", "content": "a", "reasoning": "r", "x": 1}]})");
  EXPECT_EQ(c[0].to_template_json().dump(), R"({"role":"user","content":"q"})");
  EXPECT_EQ(c[1].to_template_json().dump(),
            R"({"thinking":"r","role":"assistant","content":"a","reasoning":"r","x":1,"reasoning_content":"r"})");
}

TEST(ChatJinja, AutoJinjaNameFilesAndKeywords) {
  const fs::path dir = folder_with("named", {{"bos_token", "<s>"}, {"eos_token", "</s>"},
                                             {"chat_template", json::array({{{"name", "default"}, {"template", kEcho}},
                                                                            {{"name", "tool_use"}, {"template", "T{{ tools[0].name }}"}},
                                                                            {{"name", "kw"}, {"template", "{{ greeting }}"}}})}});
  const Tokenizer tokenizer(dir.string());
  const Conversation c{{ChatRole::user, "hi"}};
  const ChatTemplate automatic = resolve_chat_template("auto", tokenizer);
  EXPECT_EQ(automatic.render_text(c, true), "<s>[user]hi[assistant]");
  EXPECT_EQ(automatic.assistant_suffix, "</s>");
  EXPECT_EQ(automatic.source, (dir / "tokenizer_config.json").string() + " (chat_template default)");
  // With tools, the folder's tool_use template renders (as transformers picks it).
  EXPECT_EQ(automatic.render_text(c, true, {json::array({{{"name", "f"}}}), nullptr}), "Tf");
  EXPECT_EQ(resolve_chat_template("jinja:kw", tokenizer, {{"greeting", "hello"}}).render_text(c, true), "hello");
  try {
    resolve_chat_template("jinja:rag", tokenizer);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template named \"rag\" (it has: default, tool_use, kw)"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_chat_template("chatml", tokenizer, {{"greeting", "hello"}}), ConfigError);
  std::ofstream(dir / "mine.jinja") << "{{ messages[0].content | upper }}";
  EXPECT_EQ(resolve_chat_template((dir / "mine.jinja").string(), tokenizer).render_text(c, true), "HI");
  // A shipped template written for another model (its markers are not this tokenizer's tokens) is
  // refused on a folder that has its own template; one that fits refuses tools and tool turns.
  try {
    resolve_chat_template("chatml", tokenizer);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"<|im_start|>\", which is not a token"), std::string::npos) << e.what();
  }
  const ChatTemplate demo = resolve_chat_template("demo", tokenizer);
  EXPECT_THROW(demo.render_text(c, true, {json::array({json::object()}), nullptr}), InputError);
}

TEST(ChatJinja, TemplateErrorsNameTheFileLineAndColumn) {
  const fs::path dir = folder_with("broken", json::object());
  std::ofstream(dir / "chat_template.jinja") << "line one\n{{ raise_exception('no system messages') }}";
  const Tokenizer tokenizer(dir.string());
  const ChatTemplate t = resolve_chat_template("auto", tokenizer);
  try {
    t.render_text({{ChatRole::user, "hi"}}, true);
    ADD_FAILURE() << "expected TemplateError";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "chat_template.jinja").string() + ":2:4: no system messages");
  }
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}\n  {{ m.content }\n{% endfor %}";
  try {
    resolve_chat_template("auto", Tokenizer(dir.string()));
    ADD_FAILURE() << "expected TemplateError";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "chat_template.jinja").string() + ":2:", 0), 0u) << e.what();
  }
}

TEST(ChatJinja, ARewritingTemplateTrainsTheTurnsItRendersConsistently) {
  // Earlier reasoning is dropped, the last turn's kept (as reasoning templates do).
  const fs::path dir = folder_with("rewrite", {{"eos_token", "</s>"}});
  std::ofstream(dir / "chat_template.jinja")
      << "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' and loop.last and m.reasoning_content %}"
         "(think {{ m.reasoning_content }}){% endif %}{{ m.content }}</{{ m.role }}>{% endfor %}"
         "{% if add_generation_prompt %}<assistant>{% endif %}";
  const Tokenizer tokenizer(dir.string());
  const ChatTemplate t = resolve_chat_template("auto", tokenizer);
  const Conversation c = parse(R"({"messages": [{"role": "user", "content": "q1"},
      {"role": "assistant", "content": "a1", "reasoning_content": "r1"}, {"role": "user", "content": "q2"},
      {"role": "assistant", "content": "a2", "reasoning_content": "r2"}]})");
  const RenderedConversation r = t.jinja->render_training(c, {});
  EXPECT_EQ(r.text, "<user>q1</user><assistant>a1</assistant><user>q2</user><assistant>(think r2)a2</assistant>");
  ASSERT_EQ(r.trained_spans.size(), 1u);  // the first answer renders with its reasoning when it is last
  EXPECT_EQ(r.text.substr(r.trained_spans[0].first), "(think r2)a2</assistant>");
  // The first round's rendering is not a prefix (it shows r1): one round.
  EXPECT_EQ(r.round_end_bytes, std::vector<size_t>{r.text.size()});
  const TokenizedConversation tokens = t.apply(c, tokenizer);
  EXPECT_EQ(tokens.round_ends, std::vector<size_t>{tokens.ids.size()});
  EXPECT_EQ(tokens.loss_mask.front(), 0);
  EXPECT_EQ(tokens.loss_mask.back(), 1);
}

TEST(ChatJinja, ATemplateWithNoTurnToTrainIsAnInputErrorNamingIt) {
  const fs::path dir = folder_with("prompt_only", json::object());
  std::ofstream(dir / "chat_template.jinja") << "{{ messages | length }}{% if add_generation_prompt %}>{% endif %}";
  const Tokenizer tokenizer(dir.string());
  try {
    resolve_chat_template("auto", tokenizer).apply(parse(R"({"messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"}]})"), tokenizer);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "chat_template.jinja").string() + ": no assistant message", 0), 0u)
        << e.what();
  }
}

TEST(ChatJinja, RoundsEndWhereTheConversationUpToEachRoundRenders) {
  const fs::path dir = folder_with("rounds", {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"chat_template", kEcho}});
  const Tokenizer tokenizer(dir.string());
  const ChatTemplate t = resolve_chat_template("auto", tokenizer);
  const Conversation c{{ChatRole::system, "s"}, {ChatRole::user, "q1"}, {ChatRole::assistant, "a1"},
                       {ChatRole::user, "q2"}, {ChatRole::assistant, "a2"}};
  const RenderedConversation r = t.jinja->render_training(c, {});
  EXPECT_EQ(r.text, "<s>[system]s[user]q1[assistant]a1</s>[user]q2[assistant]a2</s>");
  const std::string first = "<s>[system]s[user]q1[assistant]a1</s>";
  EXPECT_EQ(r.round_end_bytes, (std::vector<size_t>{first.size(), r.text.size()}));
  ASSERT_EQ(r.trained_spans.size(), 2u);
  EXPECT_EQ(r.text.substr(r.trained_spans[0].first, r.trained_spans[0].second - r.trained_spans[0].first), "a1</s>");
  // The ids: <s> and </s> written by the template are the control ids; no BOS added.
  const TokenizedConversation tokens = t.apply(c, tokenizer);
  EXPECT_EQ(tokens.ids.front(), tokenizer.bos_id());
  EXPECT_EQ(std::count(tokens.ids.begin(), tokens.ids.end(), tokenizer.bos_id()), 1);
  EXPECT_EQ(std::count(tokens.ids.begin(), tokens.ids.end(), tokenizer.eos_id()), 2);
  EXPECT_EQ(tokens.first_rounds(1).ids.size(), tokens.round_ends[0]);
}

}  // namespace
}  // namespace ferry
