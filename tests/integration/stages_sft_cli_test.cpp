// `ferry train-sft` end to end on the demo config, shortened: exit code, metrics.jsonl, step
// folders, final/ (loadable by `ferry eval`), the resolved config; a second invocation with
// train.resume=auto continues from the newest checkpoint; bad inputs exit 2 with the name to fix.
#include <gtest/gtest.h>

#include "tests/integration/ferry_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

int count_lines_with(const fs::path& file, const std::string& needle) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// A small, fast version of configs/demo-sft.yaml (the tiny model of the unit tests).
std::string small_run(const fs::path& out) {
  return "train-sft --config configs/demo-sft.yaml --set output.dir=" + out.string() +
         " --set data.max_samples=64 --set data.eval_file= --set data.eval_fraction=0.1"
         " --set train.micro_batch_size=4 --set train.max_steps=4"
         " --set train.save_every=2 --set train.eval_every=2 --set train.device=cpu --set logging.progress=never";
}

TEST(TrainSftCli, ShortDemoRunWritesEverything) {
  const fs::path out = fs::temp_directory_path() / ("ferry_sft_cli_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const Result r = run_ferry(small_run(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "64 samples");
  EXPECT_CONTAINS(r.output, "6 eval samples");
  EXPECT_TRUE(fs::exists(out / "config.yaml"));
  EXPECT_TRUE(fs::exists(out / "metrics.jsonl"));
  EXPECT_EQ(count_lines_with(out / "metrics.jsonl", "\"loss\""), 4);
  EXPECT_GE(count_lines_with(out / "metrics.jsonl", "\"eval_loss\""), 2);
  for (const char* folder : {"step-2", "step-4"}) {
    EXPECT_TRUE(fs::exists(out / folder / "model.safetensors")) << folder;
    EXPECT_TRUE(fs::exists(out / folder / "trainer_state.json")) << folder;
    EXPECT_TRUE(fs::exists(out / folder / "optimizer_state.safetensors")) << folder;
  }
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.model"}) {
    EXPECT_TRUE(fs::exists(out / "final" / file)) << file;
  }

  // Resume: 2 more steps on top of step-4.
  const Result resumed = run_ferry(small_run(out) + " --set train.max_steps=6 --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  EXPECT_EQ(count_lines_with(out / "metrics.jsonl", "\"loss\""), 6);
  EXPECT_TRUE(fs::exists(out / "step-6"));
  EXPECT_FALSE(fs::exists(out / "step-2")) << "output.keep_last (2) prunes older checkpoints";

  const Result eval = run_ferry("eval --model " + (out / "final").string() + " --limit 8 --max-new-tokens 8");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_CONTAINS(eval.output, "exact match: ");
  EXPECT_CONTAINS(eval.output, "/8 = ");
  fs::remove_all(out);
}

TEST(TrainSftCli, BadInputsAreUserErrors) {
  const Result missing = run_ferry("train-sft --config configs/demo-sft.yaml --set data.train_file=nope.jsonl "
                                   "--set output.dir=/tmp/ferry_sft_cli_missing --set train.device=cpu");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_CONTAINS(missing.output, "nope.jsonl");
  const Result policy = run_ferry("train-sft --config configs/demo-sft.yaml --set offload.policy=params "
                                  "--set output.dir=/tmp/ferry_sft_cli_policy --set train.device=cpu");
  EXPECT_EQ(policy.exit_code, 2) << policy.output;
  EXPECT_CONTAINS(policy.output, "offload.policy");
  fs::remove_all("/tmp/ferry_sft_cli_missing");
  fs::remove_all("/tmp/ferry_sft_cli_policy");
}

}  // namespace
