// Training-loop parts: schedule shapes, fp16 loss scaling, atomic checkpoint folders (with an
// injected failure mid-save), pruning, resume resolution, and the stop signal.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "src/core/error.h"
#include "src/train/checkpoint_folders.h"
#include "src/train/loss_scaler.h"
#include "src/train/lr_schedule.h"
#include "src/train/stop_signal.h"

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
    dir = fs::temp_directory_path() / ("ferry_ckpt_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
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
  write_folder_atomic(checkpoint_folder(dir, 10), [](const fs::path& f) { write_marker(f, "ten"); });
  EXPECT_THROW(write_folder_atomic(checkpoint_folder(dir, 20),
                                   [](const fs::path& f) {
                                     write_marker(f, "half");
                                     throw std::runtime_error("injected failure while saving");
                                   }),
               std::runtime_error);
  EXPECT_EQ(list_checkpoints(dir), std::vector<int64_t>{10});
  EXPECT_FALSE(fs::exists(checkpoint_folder(dir, 20)));
  EXPECT_EQ(read_marker(*resolve_resume(dir, "auto")), "ten");
  // Nothing temporary is left behind.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST_F(CheckpointFolders, KilledSaveIsIgnoredAndCleanedUp) {
  write_folder_atomic(checkpoint_folder(dir, 1), [](const fs::path& f) { write_marker(f, "one"); });
  // What a process killed mid-save leaves: a temporary folder with partial content.
  fs::create_directories(dir / ".step-2.tmp-999999");
  write_marker(dir / ".step-2.tmp-999999", "partial");
  EXPECT_EQ(list_checkpoints(dir), std::vector<int64_t>{1});
  EXPECT_EQ(resolve_resume(dir, "auto")->filename(), "step-1");
  EXPECT_THROW(resolve_resume(dir, (dir / ".step-2.tmp-999999").string()), InputError);
  prune_checkpoints(dir, 0);
  EXPECT_FALSE(fs::exists(dir / ".step-2.tmp-999999"));
}

TEST_F(CheckpointFolders, ReplacingAFolderKeepsTheNewContent) {
  write_folder_atomic(dir / "final", [](const fs::path& f) { write_marker(f, "old"); });
  write_folder_atomic(dir / "final", [](const fs::path& f) { write_marker(f, "new"); });
  EXPECT_EQ(read_marker(dir / "final"), "new");
}

TEST_F(CheckpointFolders, PruneKeepsNewest) {
  for (int64_t step : {5, 10, 15, 20}) {
    write_folder_atomic(checkpoint_folder(dir, step), [](const fs::path& f) { write_marker(f, "x"); });
  }
  fs::create_directories(dir / "step-abc");  // not a checkpoint name: left alone
  prune_checkpoints(dir, 2);
  EXPECT_EQ(list_checkpoints(dir), (std::vector<int64_t>{15, 20}));
  EXPECT_TRUE(fs::exists(dir / "step-abc"));
}

TEST_F(CheckpointFolders, ResumeSettings) {
  EXPECT_FALSE(resolve_resume(dir, "").has_value());
  EXPECT_FALSE(resolve_resume(dir, "auto").has_value());  // nothing yet: start fresh
  try {
    resolve_resume(dir, "/no/such/checkpoint");
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
