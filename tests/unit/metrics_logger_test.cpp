// MetricsLogger wiring: which sink gets which rows (log_every, last step, eval prefixes), config
// switches, the progress mode choice, and start/resume handling of files a previous run left.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/metrics_logger.h"
#include "src/metrics/tensorboard_event.h"
#include "src/metrics/tfrecord.h"
#include "tests/unit/metrics_temp_dir.h"

namespace ferry {
namespace {

class MetricsLoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_support::fresh_test_dir("ferry_metrics_logger_test");
  }
  void TearDown() override { test_support::remove_tree(dir_); }

  MetricsLoggerOptions options(int64_t total_steps, std::optional<int64_t> resume_step = std::nullopt) {
    MetricsLoggerOptions result;
    result.total_steps = total_steps;
    result.resume_step = resume_step;
    result.console = &console_;
    result.console_is_terminal = false;
    result.monotonic_clock = [this] { return now_; };
    result.wall_clock = [this] { return 1700000000.0 + now_; };
    return result;
  }

  std::filesystem::path dir_;
  std::ostringstream console_;
  double now_ = 0.0;
};

TEST_F(MetricsLoggerTest, RowsGoToJsonlTensorBoardAndConsoleEveryLogEverySteps) {
  LoggingConfig config;
  config.log_every = 2;
  MetricsLogger metrics(config, dir_, options(3));
  for (int64_t step = 1; step <= 3; ++step) {
    now_ += 1.0;
    metrics.log_train(step, {{"loss", 1.0 / step}, {"lr", 0.5}});
  }
  metrics.log_eval(3, {{"loss", 0.25}, {"eval_accuracy", 0.75}});
  const auto tb_file = metrics.tensorboard_file();
  metrics.close();

  EXPECT_EQ(metrics.jsonl_path(), dir_ / "metrics.jsonl");
  EXPECT_EQ(read_file(dir_ / "metrics.jsonl"),
            "{\"step\":2,\"loss\":0.5,\"lr\":0.5}\n"
            "{\"step\":3,\"loss\":0.3333333333333333,\"lr\":0.5}\n"
            "{\"step\":3,\"eval_loss\":0.25,\"eval_accuracy\":0.75}\n");

  EXPECT_EQ(tb_file.parent_path(), dir_ / "tb");
  const auto records = read_tfrecord_file(tb_file);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0], encode_file_version_event(1700000000.0));
  EXPECT_EQ(records[1], encode_session_start_event(1700000000.0, 0));  // fresh start
  EXPECT_EQ(records[2], encode_scalars_event(1700000002.0, 2, {{"train/loss", 0.5}, {"train/lr", 0.5}}));
  EXPECT_EQ(records[3], encode_scalars_event(1700000003.0, 3, {{"train/loss", 1.0 / 3}, {"train/lr", 0.5}}));
  EXPECT_EQ(records[4], encode_scalars_event(1700000003.0, 3, {{"eval/loss", 0.25}, {"eval/accuracy", 0.75}}));

  EXPECT_EQ(console_.str(),
            "step 2/3 | loss 0.5000 | lr 5.00e-01 | ETA 1s\n"
            "step 3/3 | loss 0.3333 | lr 5.00e-01 | ETA 0s\n"
            "eval step 3 | eval_loss 0.2500 | eval_accuracy 0.75\n");
}

TEST_F(MetricsLoggerTest, SwitchesTurnSinksOff) {
  LoggingConfig config;
  config.jsonl = false;
  config.tensorboard = false;
  MetricsLogger metrics(config, dir_, options(1));
  metrics.log_train(1, {{"loss", 1.0}});
  metrics.close();
  EXPECT_TRUE(metrics.jsonl_path().empty());
  EXPECT_TRUE(metrics.tensorboard_file().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "tb"));
  EXPECT_EQ(console_.str(), "step 1/1 | loss 1.0000\n");
}

TEST_F(MetricsLoggerTest, ProgressModeAlwaysDrawsInPlaceEvenWithoutTerminal) {
  LoggingConfig config;
  config.progress = ProgressMode::always;
  config.jsonl = config.tensorboard = false;
  MetricsLogger metrics(config, dir_, options(2));
  metrics.log_train(1, {{"loss", 1.0}});
  metrics.close();
  EXPECT_EQ(console_.str(), "\rstep 1/2 | loss 1.0000\n");
}

TEST_F(MetricsLoggerTest, AutoModeDrawsInPlaceOnATerminalOnly) {
  LoggingConfig config;
  config.jsonl = config.tensorboard = false;
  auto on_terminal = options(2);
  on_terminal.console_is_terminal = true;
  {
    MetricsLogger metrics(config, dir_, on_terminal);
    metrics.log_train(1, {{"loss", 1.0}});
  }  // the destructor closes too
  EXPECT_EQ(console_.str(), "\rstep 1/2 | loss 1.0000\n");
  config.progress = ProgressMode::never;
  console_.str("");
  MetricsLogger never(config, dir_, on_terminal);
  never.log_train(1, {{"loss", 1.0}});
  EXPECT_EQ(console_.str(), "step 1/2 | loss 1.0000\n");
}

TEST_F(MetricsLoggerTest, ResumeDropsRowsAfterTheCheckpointAndMarksTheRestart) {
  LoggingConfig config;
  {
    MetricsLogger crashed(config, dir_, options(10));
    for (int64_t step = 1; step <= 5; ++step) crashed.log_train(step, {{"loss", 10.0 - step}});
  }
  MetricsLogger resumed(config, dir_, options(10, /*resume_step=*/3));
  resumed.log_train(4, {{"loss", 0.5}});
  const auto tb_file = resumed.tensorboard_file();
  resumed.close();
  EXPECT_EQ(read_file(dir_ / "metrics.jsonl"),
            "{\"step\":1,\"loss\":9.0}\n{\"step\":2,\"loss\":8.0}\n{\"step\":3,\"loss\":7.0}\n{\"step\":4,\"loss\":0.5}\n");
  const auto records = read_tfrecord_file(tb_file);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1], encode_session_start_event(1700000000.0, 4));
  size_t event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "tb")) event_files += entry.is_regular_file();
  EXPECT_EQ(event_files, 2u);  // the crashed run's file stays; TensorBoard hides its steps >= 4
}

TEST_F(MetricsLoggerTest, FreshStartClearsAnOldMetricsFile) {
  LoggingConfig config;
  config.tensorboard = false;
  {
    MetricsLogger first(config, dir_, options(2));
    first.log_train(1, {{"loss", 1.0}});
  }
  MetricsLogger second(config, dir_, options(2));
  second.log_train(1, {{"loss", 2.0}});
  second.close();
  EXPECT_EQ(read_file(dir_ / "metrics.jsonl"), "{\"step\":1,\"loss\":2.0}\n");
}

TEST_F(MetricsLoggerTest, BadRowsAndConfigAreReported) {
  LoggingConfig config;
  config.jsonl = config.tensorboard = false;
  MetricsLogger metrics(config, dir_, options(2));
  EXPECT_THROW(metrics.log_train(1, {{"loss", 1.0}, {"loss", 2.0}}), InternalError);
  EXPECT_THROW(metrics.log_train(1, {{"step", 1.0}}), InternalError);
  EXPECT_THROW(metrics.log_eval(1, {{"loss", 1.0}, {"eval_loss", 2.0}}), InternalError);
  config.log_every = 0;
  EXPECT_THROW(MetricsLogger(config, dir_, options(2)), ConfigError);
}

}  // namespace
}  // namespace ferry
