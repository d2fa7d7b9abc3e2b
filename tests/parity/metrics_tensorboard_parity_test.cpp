// Ferry's hand-encoded TensorBoard event files read back by the Python `tensorboard` package
// (EventAccumulator and its CRC-checking record reader), which must see every tag, step and value
// the test logged. Also a resumed run: TensorBoard must show the resumed run's values, not the
// crashed run's, for steps after the checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/metrics_temp_dir.h"
#include "src/metrics/metrics_logger.h"

namespace ferry {
namespace {

// The checker's exit status when the files disagree with the expectations (anything else that
// is not 0 means the checker could not run, e.g. FERRY_PYTHON lacks the tensorboard package).
constexpr int kCheckerMismatch = 3;

// Runs the checker on an expectations file; returns its exit status (0: everything matched).
int run_checker(const nlohmann::json& expected, const std::filesystem::path& dir) {
  const auto spec_path = dir / "expected.json";
  std::ofstream(spec_path) << expected.dump(2);
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/metrics_tensorboard_check.py' '" + spec_path.string() + "'";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class MetricsTensorBoardParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_support::fresh_test_dir("ferry_tb_parity");
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) test_support::remove_tree(dir_);  // keep the files to inspect a failure
  }

  MetricsLoggerOptions options(std::optional<int64_t> resume_step) {
    MetricsLoggerOptions result;
    result.total_steps = 100;
    result.resume_step = resume_step;
    result.console = &console_;
    result.console_is_terminal = false;
    result.monotonic_clock = [this] { return now_; };
    result.wall_clock = [this] { return kStartTime + now_; };
    return result;
  }

  static constexpr double kStartTime = 1700000000.5;
  std::filesystem::path dir_;
  std::ostringstream console_;
  double now_ = 0.0;
};

TEST_F(MetricsTensorBoardParityTest, EveryTagStepAndValueReadsBack) {
  LoggingConfig config;
  config.jsonl = false;
  MetricsLogger metrics(config, dir_, options(std::nullopt));
  const std::vector<double> awkward{0.0, -1.5, 1e-8, 3.4e38, 123456.789, std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<double>::infinity(), 2.0 / 3.0};
  std::map<std::string, nlohmann::json> expected;
  for (int64_t step = 1; step <= 40; ++step) {
    now_ += 0.75;
    const double loss = 4.0 / static_cast<double>(step);
    const double lr = 2e-5 * static_cast<double>(step % 7);
    const double odd = awkward[static_cast<size_t>(step) % awkward.size()];
    metrics.log_train(step, {{"loss", loss}, {"lr", lr}, {"tokens_per_s", 1000.0 + step}, {"odd", odd}});
    expected["train/loss"].push_back({step, loss});
    expected["train/lr"].push_back({step, lr});
    expected["train/tokens_per_s"].push_back({step, 1000.0 + step});
    // JSON has no NaN or infinity: the checker reads them spelled as strings.
    expected["train/odd"].push_back({step, std::isnan(odd) ? nlohmann::json("nan")
                                               : std::isinf(odd) ? nlohmann::json(odd > 0 ? "inf" : "-inf")
                                                                 : nlohmann::json(odd)});
    if (step % 10 == 0) {
      metrics.log_eval(step, {{"loss", loss * 1.1}, {"accuracy", step / 40.0}});
      expected["eval/loss"].push_back({step, loss * 1.1});
      expected["eval/accuracy"].push_back({step, step / 40.0});
    }
  }
  metrics.close();
  const nlohmann::json spec{{"logdir", (dir_ / "tb").string()},
                            {"event_files", 1},
                            {"wall_time_range", {kStartTime, kStartTime + now_}},
                            {"scalars", expected}};
  EXPECT_EQ(run_checker(spec, dir_), 0) << "the Python tensorboard reader disagreed; files kept in " << dir_;
}

TEST_F(MetricsTensorBoardParityTest, ResumedRunReplacesTheCrashedRunsLaterSteps) {
  LoggingConfig config;
  config.jsonl = false;
  {
    MetricsLogger crashed(config, dir_, options(std::nullopt));
    for (int64_t step = 1; step <= 8; ++step) crashed.log_train(step, {{"loss", 100.0 + step}});
  }  // crashed after step 8; the last checkpoint was at step 5
  now_ += 5.0;
  MetricsLogger resumed(config, dir_, options(/*resume_step=*/5));
  for (int64_t step = 6; step <= 10; ++step) resumed.log_train(step, {{"loss", 200.0 + step}});
  resumed.close();

  nlohmann::json loss;
  for (int64_t step = 1; step <= 5; ++step) loss.push_back({step, 100.0 + step});
  for (int64_t step = 6; step <= 10; ++step) loss.push_back({step, 200.0 + step});
  const nlohmann::json spec{{"logdir", (dir_ / "tb").string()},
                            {"event_files", 2},
                            {"wall_time_range", {kStartTime, kStartTime + now_}},
                            {"scalars", {{"train/loss", loss}}}};
  EXPECT_EQ(run_checker(spec, dir_), 0) << "the Python tensorboard reader disagreed; files kept in " << dir_;
}

TEST_F(MetricsTensorBoardParityTest, CheckerCatchesAWrongValue) {
  // The checker itself must be able to fail: expect a value that was not logged.
  LoggingConfig config;
  config.jsonl = false;
  MetricsLogger metrics(config, dir_, options(std::nullopt));
  metrics.log_train(1, {{"loss", 1.0}});
  metrics.close();
  const nlohmann::json spec{{"logdir", (dir_ / "tb").string()},
                            {"event_files", 1},
                            {"wall_time_range", {kStartTime, kStartTime + 1}},
                            {"scalars", {{"train/loss", {{1, 1.0001}}}}}};
  EXPECT_EQ(run_checker(spec, dir_), kCheckerMismatch);
  // And a damaged data CRC: tensorboard's record reader reports data loss.
  const auto file = std::filesystem::directory_iterator(dir_ / "tb")->path();
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char last = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(last ^ 0xFF));
  }
  const nlohmann::json good{{"logdir", (dir_ / "tb").string()},
                            {"event_files", 1},
                            {"wall_time_range", {kStartTime, kStartTime + 1}},
                            {"scalars", {{"train/loss", {{1, 1.0}}}}}};
  EXPECT_EQ(run_checker(good, dir_), kCheckerMismatch);
}

}  // namespace
}  // namespace ferry
