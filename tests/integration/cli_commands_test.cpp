// The `ferry` executable as a user runs it: help, config show with overrides, error exit codes,
// stage/config mismatches, commands not built yet.
#include <gtest/gtest.h>

#include "tests/integration/ferry_process.h"
#include "tests/support/scratch_dir.h"
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = ferry::test_support::process_scratch_dir("ferry_cli_test");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

TEST(Cli, HelpListsEveryCommand) {
  const Result r = run_ferry("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* command : {"train-sft", "train-rm", "train-dpo", "train-ppo", "pipeline", "generate", "plan",
                              "export", "config", "version", "score"}) {
    EXPECT_CONTAINS(r.output, command);
  }
}

TEST(Cli, NoCommandIsAUsageError) {
  const Result r = run_ferry("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "subcommand");
}

TEST(Cli, VersionReportsLibtorchAndGpu) {
  const Result r = run_ferry("version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_CONTAINS(r.output, "libtorch 2.11");
  EXPECT_CONTAINS(r.output, "gpu:");
  EXPECT_CONTAINS(r.output, "cuda kernels:");
}

TEST(Cli, ConfigShowPrintsOverride) {
  const Result r = run_ferry("config show --config configs/demo.yaml --set train.learning_rate=0.001");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "learning_rate: 0.001");
}

TEST(Cli, MisspeltKeyExitsTwoWithSuggestion) {
  const Result r = run_ferry("config show --config configs/demo.yaml --set train.lerning_rate=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "learning_rate");
  EXPECT_CONTAINS(r.output, "did you mean");
}

TEST(Cli, BadConfigFileNamesFileAndLine) {
  const auto path = write_temp("bad.yaml", "train:\n  seed: 1\n  epochs: many\n");
  const Result r = run_ferry("config show --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, path + ":3");
  EXPECT_CONTAINS(r.output, "train.epochs: expected an integer");
}

TEST(Cli, MissingConfigFileExitsTwo) {
  const Result r = run_ferry("train-sft --config does/not/exist.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "does/not/exist.yaml");
}

TEST(Cli, StageMismatchIsRejected) {
  const auto path = write_temp("rm.yaml", "stage: rm\n");
  const Result r = run_ferry("train-sft --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "is for stage 'rm'");
  EXPECT_CONTAINS(r.output, "ferry train-rm");
}

TEST(Cli, PipelineChecksEveryStageConfigFirst) {
  const auto bad_stage = write_temp("stage2.yaml", "stage: rm\ntrain:\n  lerning_rate: 1\n");
  const auto good_stage = write_temp("stage1.yaml", "stage: sft\n");
  const auto pipeline = write_temp("pipe.yaml", "pipeline:\n  stages: [" + good_stage + ", " + bad_stage + "]\n");
  const Result r = run_ferry("pipeline --config " + pipeline);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, bad_stage + ":3: unknown key 'train.lerning_rate'");
  const auto empty = write_temp("empty_pipe.yaml", "train:\n  seed: 1\n");
  EXPECT_CONTAINS(run_ferry("pipeline --config " + empty).output, "pipeline.stages is empty");
}

// `--set` on a pipeline sets the key in every stage: where the stage files set it differently (a
// learning rate for SFT and another for RM), the run says so, naming each stage's own value.
TEST(Cli, PipelineSetWarnsWhereStagesDiffer) {
  const auto sft = write_temp("warn_sft.yaml", "stage: sft\nmodel: {path: /nonexistent-model-folder}\n"
                                               "train: {learning_rate: 1.0e-3}\n");
  const auto rm = write_temp("warn_rm.yaml", "stage: rm\ntrain: {learning_rate: 5.0e-4}\n");
  const auto pipeline = write_temp("warn_pipe.yaml", "pipeline:\n  stages: [" + sft + ", " + rm + "]\n");
  const Result r = run_ferry("pipeline --config " + pipeline + " --set train.learning_rate=1e-4 --set train.seed=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;  // the first stage's model does not exist
  EXPECT_CONTAINS(r.output, "warning: --set train.learning_rate=1e-4 sets train.learning_rate in every stage");
  EXPECT_CONTAINS(r.output, sft + ": 0.001");
  EXPECT_CONTAINS(r.output, rm + ": 5e-04");
  EXPECT_EQ(r.output.find("sets train.seed"), std::string::npos) << r.output;  // the stages agree on the seed
}

TEST(Cli, GrpoWithoutRewardsSaysHowToListThem) {
  const Result r = run_ferry("train-grpo --config configs/demo.yaml --set stage=grpo");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "rewards: GRPO learns from rewards you list, e.g. rewards: [{kind: verifier}]");
}

TEST(Cli, DocumentedDefaultsMatchTheCode) {
  // configs/README.md embeds `ferry config show`; keep it true to the code.
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/configs/README.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Result r = run_ferry("config show");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(doc.find("```yaml\n" + r.output + "```"), std::string::npos)
      << "configs/README.md is out of date: replace its yaml block with the output of `ferry config show`";
}

TEST(Cli, ConfigKeysListsEveryKey) {
  const Result r = run_ferry("config keys");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_CONTAINS(r.output, "train.learning_rate\n");
  EXPECT_CONTAINS(r.output, "offload.gpu_memory\n");
}

}  // namespace
