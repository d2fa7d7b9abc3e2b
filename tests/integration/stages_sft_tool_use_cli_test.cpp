// Tool use with a model's own chat template (the full Qwen2.5 template, tools and all, in a tiny
// Llama folder of tests/parity/generate_chat_template_ref.py): tests/data/sft_tool_use.jsonl
// tokenised with loss on the assistant turns, tool calls included, and on nothing else;
// `ferry train-sft` trains on it; `ferry generate --prompts` answers prompts with tools and tool
// results; a shipped (YAML) template refuses them with a clear error. The folder's named template
// (additional_chat_templates/plain.jinja, as transformers saves them) is copied into the trained
// model and the `ferry export` folder, where `jinja:plain` still selects it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/config/config.h"
#include "core/file_util.h"
#include "src/data/sft_dataset.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/integration/ferry_process.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

const std::string kSource = FERRY_SOURCE_DIR;
// A named template beside the default one.
const std::string kPlainTemplate =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

// A copy of the fixture's Qwen2.5-like folder with Qwen2.5's real template (tool branches included).
fs::path tool_model_folder() {
  static const fs::path dir = [] {
    const fs::path out = ferry_test::process_temp_dir("ferry_tool_use") / "model";
    fs::create_directories(out.parent_path());
    fs::copy(std::string(FERRY_FIXTURES_DIR) + "/generate_chat_template/qwen25_no_tools", out,
             fs::copy_options::recursive);
    fs::copy_file(kSource + "/configs/templates/jinja/qwen2.5/Qwen2.5-7B-Instruct.jinja", out / "chat_template.jinja");
    fs::create_directories(out / "additional_chat_templates");
    write_file_atomic(out / "additional_chat_templates" / "plain.jinja", kPlainTemplate);
    return out;
  }();
  return dir;
}

TEST(ToolUse, LossCoversTheAssistantTurnsWithTheirToolCalls) {
  const Tokenizer tokenizer(tool_model_folder().string());
  const ChatTemplate tmpl = resolve_chat_template("auto", tokenizer);
  const SftDataset data = load_sft_dataset(kSource + "/tests/data/sft_tool_use.jsonl", tokenizer, tmpl, 1024, false, 0);
  ASSERT_EQ(data.samples.size(), 4u);
  for (const TokenizedSample& sample : data.samples) {
    std::vector<int64_t> trained, untrained;
    for (size_t i = 0; i < sample.ids.size(); ++i) (sample.loss_mask[i] ? trained : untrained).push_back(sample.ids[i]);
    // Decoding drops special tokens, so the end of turn shows as the newline after <|im_end|>.
    const std::string loss = tokenizer.decode(trained), prompt = tokenizer.decode(untrained);
    SCOPED_TRACE("trained: " + loss + "\nnot trained: " + prompt);
    EXPECT_EQ(loss.find("<tool_call>\n{\"name\": \""), 0u);
    EXPECT_NE(loss.find("\"arguments\": {"), std::string::npos);
    EXPECT_NE(loss.find("</tool_call>\n"), std::string::npos);
    EXPECT_EQ(loss.find("<tool_response>"), std::string::npos);
    EXPECT_EQ(loss.find("You can call tools."), std::string::npos);
    EXPECT_NE(prompt.find("<tools>"), std::string::npos);
    EXPECT_NE(prompt.find("<tool_response>"), std::string::npos);
    EXPECT_NE(prompt.find("You can call tools."), std::string::npos);
  }
  EXPECT_NE(tokenizer.decode(std::vector<int64_t>(data.samples[0].ids)).find("17 + 25 = 42."), std::string::npos);
}

TEST(ToolUse, TrainSftAndGenerateWithTools) {
  const fs::path model = tool_model_folder();
  const fs::path out = model.parent_path() / "sft";
  const std::string config = ferry_test::write_text(
      model.parent_path(), "sft.yaml",
      "stage: sft\nmodel: {path: " + model.string() + "}\n"
      "data: {train_file: tests/data/sft_tool_use.jsonl, max_length: 1024}\n"
      "train: {micro_batch_size: 2, max_steps: 3, learning_rate: 1.0e-3}\noutput: {dir: " + out.string() + "}\n");
  const auto train = ferry_test::run_ferry("train-sft --config " + config + ferry_test::kQuietCpu);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_CONTAINS(train.output, "chat template auto (" + (model / "chat_template.jinja").string() + ")");
  EXPECT_CONTAINS(train.output, "4 samples");
  EXPECT_TRUE(fs::exists(out / "final" / "chat_template.jinja"));
  EXPECT_EQ(read_file((out / "final" / "additional_chat_templates" / "plain.jinja").string()), kPlainTemplate);
  const fs::path exported = model.parent_path() / "exported";
  const auto exporting = ferry_test::run_ferry("export --checkpoint " + (out / "final").string() + " --output " +
                                               exported.string());
  ASSERT_EQ(exporting.exit_code, 0) << exporting.output;
  EXPECT_CONTAINS(exporting.output, "additional_chat_templates/plain.jinja");
  EXPECT_EQ(read_file((exported / "additional_chat_templates" / "plain.jinja").string()), kPlainTemplate);
  const Tokenizer exported_tokenizer(exported.string());
  EXPECT_EQ(resolve_chat_template("jinja:plain", exported_tokenizer).render_text({{ChatRole::user, "Hi"}}, true),
            "user: Hi\nassistant:");

  const auto generated = ferry_test::run_command("cd '" + kSource + "' && '" + FERRY_BINARY + "' generate --model " +
                                                     (out / "final").string() +
                                                     " --prompts tests/data/prompts_tool_use.jsonl --greedy --max-new-tokens 4",
                                                 /*with_stderr=*/false);
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_EQ(std::count(generated.output.begin(), generated.output.end(), '\n'), 2) << generated.output;
  EXPECT_CONTAINS(generated.output, "\"completion\"");

  const auto refused = ferry_test::run_ferry("generate --model " + model.string() +
                                             " --prompts tests/data/prompts_tool_use.jsonl --chat-template chatml");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_CONTAINS(refused.output, "tokenizer.chat_template: auto");
}

}  // namespace
}  // namespace ferry
