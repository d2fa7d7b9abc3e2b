// `ferry config import` as a user runs it: a TRL / LLaMA-Factory YAML in, a Ferry config out (file
// or stdout) that `ferry config show -c` loads, the unmapped keys on stderr, exit 2 with the file
// named for an unknown tool, a missing file or a missing stage.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/ferry_process.h"

namespace {

using ferry_test::run_command;
using ferry_test::run_ferry;

const std::string kData = "tests/data/config_import/";

TEST(CliConfigImport, WritesAConfigThatConfigShowLoads) {
  const std::filesystem::path dir = ferry_test::process_temp_dir("ferry_config_import");
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "sft.yaml").string();
  const auto imported = run_ferry("config import --from trl " + kData + "trl_sft.yaml --stage sft --output " + out);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_CONTAINS(imported.output, "not mapped");  // stderr
  EXPECT_CONTAINS(imported.output, "push_to_hub:");
  ASSERT_TRUE(std::filesystem::exists(out));

  const auto shown = run_ferry("config show -c " + out);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_CONTAINS(shown.output, "stage: sft");
  EXPECT_CONTAINS(shown.output, "train_file: \"hf:trl-lib/Capybara\"");
  EXPECT_CONTAINS(shown.output, "max_length: 2048");
  EXPECT_CONTAINS(shown.output, "micro_batch_size: 2");
  EXPECT_CONTAINS(shown.output, "rank: 32");
}

TEST(CliConfigImport, PrintsToStdoutAndTakesTheStageFromTheFile) {
  const std::string command = std::string("cd '") + FERRY_SOURCE_DIR + "' && '" + FERRY_BINARY +
                              "' config import --from llamafactory " + kData + "llamafactory_dpo.yaml";
  const auto stdout_only = run_command(command, /*with_stderr=*/false);
  ASSERT_EQ(stdout_only.exit_code, 0) << stdout_only.output;
  EXPECT_CONTAINS(stdout_only.output, "stage: dpo");
  EXPECT_EQ(stdout_only.output.find("not mapped"), std::string::npos) << "the unmapped list belongs on stderr";
  const auto stderr_only = run_command(command + " 2>&1 >/dev/null | cat", /*with_stderr=*/false);
  EXPECT_CONTAINS(stderr_only.output, "dataset: LLaMA-Factory names datasets");
}

TEST(CliConfigImport, ErrorsExitTwoNamingTheFile) {
  const auto tool = run_ferry("config import --from unsloth " + kData + "trl_sft.yaml --stage sft");
  EXPECT_EQ(tool.exit_code, 2) << tool.output;
  EXPECT_CONTAINS(tool.output, "trl_sft.yaml");
  const auto missing = run_ferry("config import --from trl " + kData + "absent.yaml --stage sft");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_CONTAINS(missing.output, "absent.yaml");
  const auto stage = run_ferry("config import --from trl " + kData + "trl_sft.yaml");
  EXPECT_EQ(stage.exit_code, 2) << stage.output;
  EXPECT_CONTAINS(stage.output, "--stage");
}

}  // namespace
