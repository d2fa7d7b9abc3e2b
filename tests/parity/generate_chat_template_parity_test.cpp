// Issue 33's folders against transformers (tests/parity/generate_chat_template_ref.py): tiny random
// Llama models whose chat template Ferry has never seen (SmolLM2's written with literal newlines in
// chat_template.jinja; Qwen2.5's without the tool branches in tokenizer_config.json):
//   - `auto` renders the prompt text and ids of apply_chat_template(add_generation_prompt=True);
//   - greedy generation from them (library and `ferry generate --chat --greedy`) gives the tokens
//     and text of transformers' generate();
//   - raw generation (no --chat) needs no template: it works with a template that does not parse,
//     and --chat then exits 2 naming the template file, line and column;
//   - a prefilled answer (the conversation ends with the start of the assistant's message) renders
//     as apply_chat_template(continue_final_message=True) and greedy generation continues it as
//     transformers' does (library, and `ferry generate --prompts --continue-final-message`); a
//     final message that is not the assistant's, or --prompt, is refused with exit 2.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

#include "core/file_util.h"
#include "src/generate/generate.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/integration/ferry_process.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/generate_chat_template/";

const nlohmann::json& cases() {
  static const nlohmann::json json = nlohmann::json::parse(read_file(kFixtures + "cases.json"));
  return json;
}

Conversation to_conversation(const nlohmann::json& messages) {
  Conversation out;
  for (const auto& m : messages) out.push_back({chat_role_from_string(m["role"].get<std::string>()), m["content"]});
  return out;
}

class ChatFolderParity : public ::testing::TestWithParam<std::string> {
 protected:
  const nlohmann::json& folder() const { return cases()["folders"][GetParam()]; }
};

TEST_P(ChatFolderParity, AutoRendersAndGeneratesAsTransformers) {
  const auto& f = folder();
  const std::string dir = f["folder"].get<std::string>();
  const Tokenizer tokenizer(dir);
  const ChatTemplate tmpl = resolve_chat_template("auto", tokenizer);
  CausalLM model = causal_lm_from_pretrained(dir);
  torch::NoGradGuard no_grad;
  for (const auto& c : f["cases"]) {
    SCOPED_TRACE(c["text"].get<std::string>());
    const Conversation conversation = to_conversation(c["messages"]);
    EXPECT_EQ(tmpl.render_text(conversation, true), c["text"].get<std::string>());
    const std::vector<int64_t> ids = tmpl.render_prompt(conversation, tokenizer);
    ASSERT_EQ(ids, c["ids"].get<std::vector<int64_t>>());
    const torch::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0);
    const GenerateResult result = generate(*model, input, torch::ones_like(input),
                                           {.max_new_tokens = 12, .eos_token_ids = {f["eos_id"].get<int64_t>()}});
    std::vector<int64_t> generated(result.tokens.data_ptr<int64_t>() + ids.size(),
                                   result.tokens.data_ptr<int64_t>() + result.tokens.size(1));
    EXPECT_EQ(generated, c["new_ids"].get<std::vector<int64_t>>());
  }
}

TEST_P(ChatFolderParity, FerryGenerateChatPrintsTransformersCompletion) {
  const auto& f = folder();
  const auto& first = f["cases"][0];
  ASSERT_EQ(first["messages"].size(), 1u);
  const auto run = ferry_test::run_ferry("generate --model '" + f["folder"].get<std::string>() + "' --prompt '" +
                                         first["messages"][0]["content"].get<std::string>() +
                                         "' --chat --greedy --max-new-tokens 12");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, first["completion"].get<std::string>() + "\n");
}

TEST_P(ChatFolderParity, ContinuesAPrefilledAnswerAsTransformers) {
  const auto& f = folder();
  const std::string dir = f["folder"].get<std::string>();
  const Tokenizer tokenizer(dir);
  const ChatTemplate tmpl = resolve_chat_template("auto", tokenizer);
  CausalLM model = causal_lm_from_pretrained(dir);
  torch::NoGradGuard no_grad;
  ASSERT_GE(f["continued"].size(), 2u);
  for (const auto& c : f["continued"]) {
    SCOPED_TRACE(c["text"].get<std::string>());
    const Conversation conversation = to_conversation(c["messages"]);
    EXPECT_EQ(tmpl.render_text(conversation, RenderEnd::continue_final_message), c["text"].get<std::string>());
    const std::vector<int64_t> ids = tmpl.render_prompt(conversation, tokenizer, {}, RenderEnd::continue_final_message);
    ASSERT_EQ(ids, c["ids"].get<std::vector<int64_t>>());
    const torch::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0);
    const GenerateResult result = generate(*model, input, torch::ones_like(input),
                                           {.max_new_tokens = 12, .eos_token_ids = {f["eos_id"].get<int64_t>()}});
    std::vector<int64_t> generated(result.tokens.data_ptr<int64_t>() + ids.size(),
                                   result.tokens.data_ptr<int64_t>() + result.tokens.size(1));
    EXPECT_EQ(generated, c["new_ids"].get<std::vector<int64_t>>());
  }

  // The command line: every line continued, as many tokens as transformers generated (its text where
  // that is whole UTF-8: a completion cut inside a character prints U+FFFD differently).
  const fs::path out = ferry_test::process_temp_dir("ferry_continue") / (GetParam() + ".jsonl");
  fs::create_directories(out.parent_path());
  const auto run = ferry_test::run_ferry("generate --model '" + dir + "' --prompts '" + kFixtures +
                                         "continued.jsonl' --continue-final-message --greedy --max-new-tokens 12 "
                                         "--output '" + out.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::istringstream lines(read_file(out.string()));
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, f["continued"].size());
    const auto& expected = f["continued"][n];
    const nlohmann::json got = nlohmann::json::parse(line);
    size_t new_tokens = expected["new_ids"].size();
    if (new_tokens > 0 && expected["new_ids"].back() == f["eos_id"]) --new_tokens;
    EXPECT_EQ(got["completion_tokens"].get<size_t>(), new_tokens) << line;
    const std::string completion = expected["completion"].get<std::string>();
    if (completion.find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(got["completion"], completion) << line;
    }
  }
  EXPECT_EQ(n, f["continued"].size());
}

INSTANTIATE_TEST_SUITE_P(Folders, ChatFolderParity, ::testing::Values("smollm2_literal_newlines", "qwen25_no_tools"));

TEST(ChatFolderParity, RawGenerationNeedsNoTemplateAndChatNamesTheBrokenOne) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_chat_broken") / "model";
  fs::create_directories(dir.parent_path());
  fs::copy(cases()["folders"]["smollm2_literal_newlines"]["folder"].get<std::string>(), dir,
           fs::copy_options::recursive);
  write_file_atomic(dir / "chat_template.jinja", "{% for m in messages %}\n  {{ m.content }\n{% endfor %}");
  const auto raw = ferry_test::run_ferry("generate --model '" + dir.string() + "' --prompt Hi --greedy --max-new-tokens 4");
  EXPECT_EQ(raw.exit_code, 0) << raw.output;
  const auto chat = ferry_test::run_ferry("generate --model '" + dir.string() + "' --prompt Hi --chat --max-new-tokens 4");
  EXPECT_EQ(chat.exit_code, 2) << chat.output;
  EXPECT_CONTAINS(chat.output, (dir / "chat_template.jinja").string() + ":2:");
}

TEST(ChatFolderParity, ContinueFinalMessageNeedsAnAssistantMessageToContinue) {
  const std::string dir = cases()["folders"]["qwen25_no_tools"]["folder"].get<std::string>();
  const fs::path tmp = ferry_test::process_temp_dir("ferry_continue_errors");
  fs::create_directories(tmp);
  const std::string user_last =
      ferry_test::write_text(tmp, "user_last.jsonl", R"({"messages": [{"role": "user", "content": "Hi"}]})" "\n");
  const auto refused = ferry_test::run_ferry("generate --model '" + dir + "' --prompts '" + user_last +
                                             "' --continue-final-message --max-new-tokens 2");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_CONTAINS(refused.output, user_last + ":1:");
  EXPECT_CONTAINS(refused.output, "the last message must be the assistant's");
  const auto single = ferry_test::run_ferry("generate --model '" + dir + "' --prompt Hi --chat --continue-final-message");
  EXPECT_EQ(single.exit_code, 2) << single.output;
  EXPECT_CONTAINS(single.output, "--continue-final-message goes with --prompts");
}

}  // namespace
}  // namespace ferry
