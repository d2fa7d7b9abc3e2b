// Training-loop parts: schedule shapes, fp16 loss scaling, atomic checkpoint folders (with an
// injected failure mid-save), manifests that keep incomplete checkpoints from being resumed,
// pruning, resume resolution, and the stop signal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "train/checkpoint_folders.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"
#include "train/stop_signal.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

TEST(LrScheduleTest, WarmupThenCosineToFloor) {
  const LrSchedulePlan plan{1.0, LrSchedule::cosine, 10, 110, 0.1};
  EXPECT_DOUBLE_EQ(learning_rate_at(plan, 0), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(plan, 5), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(plan, 10), 1.0);
  EXPECT_NEAR(learning_rate_at(plan, 60), 0.55, 1e-12);  // half-way: cos = 0 -> 0.5 * 0.9 + 0.1
  EXPECT_NEAR(learning_rate_at(plan, 110), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate_at({1.0, LrSchedule::linear, 0, 4, 0}, 3), 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate_at({2.0, LrSchedule::constant, 0, 4, 0}, 100), 2.0);
}

TEST(LossScalerTest, BacksOffOnOverflowAndGrowsAfterInterval) {
  LossScaler scaler(true, 1024.0, 2.0, 0.5, /*growth_interval=*/3);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_TRUE(scaler.update(true));
  EXPECT_FALSE(scaler.update(false));  // skipped, halved, streak reset
  EXPECT_DOUBLE_EQ(scaler.scale(), 512.0);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_TRUE(scaler.update(true));
  EXPECT_DOUBLE_EQ(scaler.scale(), 512.0);
  EXPECT_TRUE(scaler.update(true));  // third good step in a row: doubled
  EXPECT_DOUBLE_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.state().skipped_steps, 1);
  LossScaler off(false, 1024.0);
  EXPECT_DOUBLE_EQ(off.scale(), 1.0);
  EXPECT_FALSE(off.update(false));  // never step on non-finite gradients
  EXPECT_DOUBLE_EQ(off.scale(), 1.0);
}

class CheckpointFolders : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per process and test: ctest runs this fixture's tests in parallel processes.
    dir = fs::temp_directory_path() /
          ("ferry_ckpt_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::ostringstream notes;
  static void write_marker(const fs::path& folder, const std::string& text) { std::ofstream(folder / "state.txt") << text; }
  static std::string read_marker(const fs::path& folder) {
    std::ifstream in(folder / "state.txt");
    std::string s;
    std::getline(in, s);
    return s;
  }
  fs::path dir;
};

TEST_F(CheckpointFolders, FailureMidSaveLeavesPreviousCheckpointsIntact) {
  write_checkpoint_atomic(dir, 10, [](const fs::path& f) { write_marker(f, "ten"); });
  EXPECT_THROW(write_checkpoint_atomic(dir, 20,
                                   [](const fs::path& f) {
                                     write_marker(f, "half");
                                     throw std::runtime_error("injected failure while saving");
                                   }),
               std::runtime_error);
  EXPECT_EQ(list_checkpoints(dir), std::vector<int64_t>{10});
  EXPECT_FALSE(fs::exists(checkpoint_folder(dir, 20)));
  EXPECT_EQ(read_marker(*resolve_resume(dir, "auto", notes)), "ten");
  // Nothing temporary is left behind.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST_F(CheckpointFolders, KilledSaveIsIgnoredAndCleanedUp) {
  write_checkpoint_atomic(dir, 1, [](const fs::path& f) { write_marker(f, "one"); });
  // What a process killed mid-save leaves: a temporary folder with partial content.
  fs::create_directories(dir / ".step-2.tmp-999999");
  write_marker(dir / ".step-2.tmp-999999", "partial");
  EXPECT_EQ(list_checkpoints(dir), std::vector<int64_t>{1});
  EXPECT_EQ(resolve_resume(dir, "auto", notes)->filename(), "step-1");
  EXPECT_THROW(resolve_resume(dir, (dir / ".step-2.tmp-999999").string(), notes), InputError);
  std::ofstream(dir / "config.yaml.tmp-999999-0") << "half a file";  // a killed atomic file write
  prune_checkpoints(dir, 0);
  EXPECT_FALSE(fs::exists(dir / ".step-2.tmp-999999"));
  EXPECT_FALSE(fs::exists(dir / "config.yaml.tmp-999999-0"));
}

// A step-N folder made incomplete after its save (a partial copy, a deleted or truncated file) is
// skipped by `auto` with a note saying why, and refused when named.
TEST_F(CheckpointFolders, IncompleteCheckpointsAreSkippedByAutoAndSayWhy) {
  for (int64_t step : {1, 2, 3, 4}) {
    write_checkpoint_atomic(dir, step, [&](const fs::path& f) {
      write_marker(f, "step " + std::to_string(step));
      fs::create_directories(f / "policy");
      std::ofstream(f / "policy" / "model.bin") << std::string(100, 'x');
    });
  }
  const std::string manifest = (checkpoint_folder(dir, 1) / kCheckpointManifestFile).string();
  EXPECT_NE(std::ifstream(manifest).peek(), EOF);
  fs::resize_file(checkpoint_folder(dir, 4) / "policy" / "model.bin", 60);  // truncated
  fs::remove(checkpoint_folder(dir, 3) / "state.txt");                      // a file missing
  fs::remove(checkpoint_folder(dir, 2) / kCheckpointManifestFile);          // copied without the manifest
  EXPECT_EQ(read_marker(*resolve_resume(dir, "auto", notes)), "step 1");
  const std::string said = notes.str();
  EXPECT_NE(said.find("skipping " + checkpoint_folder(dir, 4).string()), std::string::npos) << said;
  EXPECT_NE(said.find("'policy/model.bin' has 60 bytes, the manifest says 100"), std::string::npos) << said;
  EXPECT_NE(said.find("'state.txt' is missing"), std::string::npos) << said;
  EXPECT_NE(said.find("has no checkpoint_manifest.json"), std::string::npos) << said;
  try {
    resolve_resume(dir, checkpoint_folder(dir, 4).string(), notes);
    FAIL() << "a truncated checkpoint was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a complete checkpoint"), std::string::npos) << e.what();
  }
  // Named explicitly, a folder without a manifest (saved before manifests) is taken with a note.
  notes.str("");
  EXPECT_EQ(read_marker(*resolve_resume(dir, checkpoint_folder(dir, 2).string(), notes)), "step 2");
  EXPECT_NE(notes.str().find("its files are not checked"), std::string::npos) << notes.str();
  // All incomplete: start fresh.
  fs::remove(checkpoint_folder(dir, 1) / "state.txt");
  EXPECT_FALSE(resolve_resume(dir, "auto", notes).has_value());
}

TEST_F(CheckpointFolders, ReplacingAFolderKeepsTheNewContent) {
  write_folder_atomic(dir / "final", [](const fs::path& f) { write_marker(f, "old"); });
  write_folder_atomic(dir / "final", [](const fs::path& f) { write_marker(f, "new"); });
  EXPECT_EQ(read_marker(dir / "final"), "new");
}

TEST_F(CheckpointFolders, PruneKeepsNewest) {
  for (int64_t step : {5, 10, 15, 20}) {
    write_checkpoint_atomic(dir, step, [](const fs::path& f) { write_marker(f, "x"); });
  }
  fs::create_directories(dir / "step-abc");  // not a checkpoint name: left alone
  prune_checkpoints(dir, 2);
  EXPECT_EQ(list_checkpoints(dir), (std::vector<int64_t>{15, 20}));
  EXPECT_TRUE(fs::exists(dir / "step-abc"));
}

TEST_F(CheckpointFolders, ResumeSettings) {
  EXPECT_FALSE(resolve_resume(dir, "", notes).has_value());
  EXPECT_FALSE(resolve_resume(dir, "auto", notes).has_value());  // nothing yet: start fresh
  try {
    resolve_resume(dir, "/no/such/checkpoint", notes);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/checkpoint"), std::string::npos);
  }
}

TEST(StopSignalTest, FirstSignalSetsTheFlag) {
  StopSignal stop;
  EXPECT_FALSE(stop.requested());
  std::raise(SIGTERM);
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.signal_number(), SIGTERM);
}

}  // namespace
}  // namespace ferry
