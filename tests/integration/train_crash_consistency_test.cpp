// Crash consistency of training runs, through the `ferry` executable: runs SIGKILLed mid-step,
// mid-checkpoint and mid-export (FERRY_FAILPOINT, core/failpoint.h) and resumed each time
// with train.resume=auto end with exactly the final weights of an uninterrupted run (fp32, byte
// for byte); a full disk during a checkpoint exits 2 naming the file and the bytes it needed,
// keeps the previous checkpoint, and a resume from it still ends on the same weights.
// scripts/kill-test.sh does the same at random moments, many times, for SFT, RM and PPO.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "tests/integration/ferry_process.h"

namespace {

namespace fs = std::filesystem;
using ferry_test::CommandResult;

const fs::path& base_dir() {
  static const fs::path dir = ferry_test::process_temp_dir("ferry_crash_consistency");
  return dir;
}

// `ferry ARGS` with FERRY_FAILPOINT set (empty: unset).
CommandResult run_with_failpoint(const std::string& failpoint, const std::string& args) {
  const std::string env = failpoint.empty() ? "" : "FERRY_FAILPOINT='" + failpoint + "' ";
  return ferry_test::run_command(std::string("cd '") + FERRY_SOURCE_DIR + "' && " + env + "'" + FERRY_BINARY + "' " + args);
}

bool killed(const CommandResult& r) { return r.exit_code == -1 || r.exit_code == 128 + SIGKILL; }

// 12 steps of demo-shaped SFT from scratch, a checkpoint every 4, all kept.
std::string sft_run(const fs::path& out) {
  return "train-sft --config configs/demo-sft.yaml --set output.dir=" + out.string() +
         " --set data.max_samples=96 --set data.eval_file= --set data.prompt_file= --set train.micro_batch_size=8"
         " --set train.max_steps=12 --set train.save_every=4 --set train.warmup_steps=2 --set output.keep_last=0" +
         ferry_test::kQuietCpu;
}

// 6 steps of a reward model from `sft`'s final model, a checkpoint every 2.
std::string rm_run(const fs::path& sft, const fs::path& out) {
  return "train-rm --config configs/demo-rm.yaml --set model.path=" + (sft / "final").string() +
         " --set output.dir=" + out.string() +
         " --set data.max_samples=64 --set data.eval_file= --set train.micro_batch_size=4 --set train.max_steps=6"
         " --set train.save_every=2 --set train.warmup_steps=0 --set output.keep_last=0" +
         ferry_test::kQuietCpu;
}

std::string final_weights(const fs::path& out) { return ferry_test::read_text((out / "final" / "model.safetensors").string()); }

class CrashConsistency : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(base_dir());
    const CommandResult r = run_with_failpoint("", sft_run(base_dir() / "sft_reference"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(base_dir()); }
};

// Killed while writing checkpoint 8, then while writing final/, then mid-step: each resume starts
// from the last complete checkpoint and the run ends on the uninterrupted run's weights.
TEST_F(CrashConsistency, SftKilledMidCheckpointMidExportAndMidStepEndsOnTheSameWeights) {
  const fs::path out = base_dir() / "sft_killed";
  const std::string run = sft_run(out);

  const CommandResult first = run_with_failpoint("write@.step-8.tmp-:kill", run);
  ASSERT_TRUE(killed(first)) << first.exit_code << "\n" << first.output;
  EXPECT_TRUE(fs::exists(out / "step-4" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(out / "step-8"));

  const CommandResult second = run_with_failpoint("write@.final.tmp-:kill", run + " --set train.resume=auto");
  ASSERT_TRUE(killed(second)) << second.exit_code << "\n" << second.output;
  EXPECT_CONTAINS(second.output, "resumed from " + (out / "step-4").string());
  EXPECT_TRUE(fs::exists(out / "step-12"));
  EXPECT_FALSE(fs::exists(out / "final"));

  // Mid-step: a run from step 4 (the later checkpoints and the log removed) killed once it has
  // logged its first step.
  fs::remove_all(out / "step-8");
  fs::remove_all(out / "step-12");
  fs::remove(out / "metrics.jsonl");
  const fs::path log = base_dir() / "sft_killed.log";
  const pid_t child = ferry_test::start_ferry(run + " --set train.resume=auto", log.string());
  ASSERT_GE(child, 0);
  for (int i = 0; i < 1200 && ferry_test::count_lines_with((out / "metrics.jsonl").string(), "{\"step\":5,") == 0; ++i) {
    ::usleep(50 * 1000);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_FALSE(fs::exists(out / "final")) << "the run ended before it was killed:\n" << ferry_test::read_text(log.string());

  const CommandResult last = run_with_failpoint("", run + " --set train.resume=auto");
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_CONTAINS(last.output, "resumed from");
  const std::string expected = final_weights(base_dir() / "sft_reference");
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(final_weights(out) == expected) << "final weights differ from the uninterrupted run's";
}

// A full disk while writing checkpoint 8: exit 2, the message names the file, the bytes it needed
// and the checkpoint kept; nothing temporary is left; a resume from step 4 ends on the same weights.
TEST_F(CrashConsistency, DiskFullDuringACheckpointKeepsThePreviousOneAndSaysWhatItNeeded) {
  const fs::path out = base_dir() / "sft_disk_full";
  const std::string run = sft_run(out);
  const CommandResult full = run_with_failpoint("write@.step-8.tmp-:enospc", run);
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_CONTAINS(full.output, "No space left on device");
  EXPECT_CONTAINS(full.output, (out / ".step-8.tmp-").string());
  EXPECT_CONTAINS(full.output, "the file still needed ");
  EXPECT_CONTAINS(full.output, " bytes (");
  EXPECT_CONTAINS(full.output, "free there now");
  EXPECT_CONTAINS(full.output, "'" + (out / "step-8").string() + "' was not saved");
  EXPECT_CONTAINS(full.output, "intact (newest: " + (out / "step-4").string() + ")");
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  const CommandResult resumed = run_with_failpoint("", run + " --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from " + (out / "step-4").string());
  EXPECT_TRUE(final_weights(out) == final_weights(base_dir() / "sft_reference"));
}

// The reward model: killed mid-checkpoint and mid-export, resumed, the same final weights.
TEST_F(CrashConsistency, RewardModelKilledTwiceEndsOnTheSameWeights) {
  const fs::path sft = base_dir() / "sft_reference";
  const CommandResult reference = run_with_failpoint("", rm_run(sft, base_dir() / "rm_reference"));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const fs::path out = base_dir() / "rm_killed";
  const std::string run = rm_run(sft, out);
  const CommandResult first = run_with_failpoint("write@.step-4.tmp-:kill", run);
  ASSERT_TRUE(killed(first)) << first.exit_code << "\n" << first.output;
  const CommandResult second = run_with_failpoint("write@.final.tmp-:kill", run + " --set train.resume=auto");
  ASSERT_TRUE(killed(second)) << second.exit_code << "\n" << second.output;
  EXPECT_CONTAINS(second.output, "resumed from " + (out / "step-2").string());
  const CommandResult last = run_with_failpoint("", run + " --set train.resume=auto");
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_CONTAINS(last.output, "resumed from " + (out / "step-6").string());
  const std::string expected = final_weights(base_dir() / "rm_reference");
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(final_weights(out) == expected) << "final weights differ from the uninterrupted run's";
}

// A malformed FERRY_FAILPOINT is a clear error, not a silently normal run.
TEST_F(CrashConsistency, MalformedFailpointIsAnError) {
  const CommandResult r = run_with_failpoint("write:zero:kill", sft_run(base_dir() / "sft_bad_failpoint"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "FERRY_FAILPOINT='write:zero:kill'");
}

}  // namespace
