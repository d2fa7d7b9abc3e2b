// Progress text with a fake clock: exact bar and line output, ETA from the moving average of
// step times, log_every for plain lines, and in-place redraw with '\r'.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "src/metrics/progress_display.h"

namespace ferry {
namespace {

TEST(MetricsFormatEta, ReadableUnits) {
  EXPECT_EQ(format_eta(0), "0s");
  EXPECT_EQ(format_eta(44.6), "45s");
  EXPECT_EQ(format_eta(185), "3m05s");
  EXPECT_EQ(format_eta(7380), "2h03m");
  EXPECT_EQ(format_eta(-3), "0s");
}

ProgressOptions options(ProgressStyle style, int64_t total_steps, int64_t log_every, SecondsClock clock) {
  ProgressOptions result;
  result.style = style;
  result.total_steps = total_steps;
  result.log_every = log_every;
  result.clock = std::move(clock);
  return result;
}

struct FakeClock {
  double now = 100.0;
  SecondsClock function() {
    return [this] { return now; };
  }
};

TEST(MetricsProgressDisplay, PlainLinesEveryLogEveryStepsAndAtTheEnd) {
  std::ostringstream out;
  FakeClock clock;
  ProgressDisplay progress(out, options(ProgressStyle::lines, 5, 2, clock.function()));
  for (int64_t step = 1; step <= 5; ++step) {
    progress.train_step(step, {{"loss", 3.0 - 0.5 * step}, {"lr", 1e-4}, {"tokens_per_s", 2048.4}});
    clock.now += 2.0;  // each step takes 2 s
  }
  progress.finish();
  EXPECT_EQ(out.str(),
            "step 2/5 | loss 2.0000 | lr 1.00e-04 | 2048 tok/s | ETA 6s\n"
            "step 4/5 | loss 1.0000 | lr 1.00e-04 | 2048 tok/s | ETA 2s\n"
            "step 5/5 | loss 0.5000 | lr 1.00e-04 | 2048 tok/s | ETA 0s\n");
}

TEST(MetricsProgressDisplay, PlainLinesAtMostOncePerLineSeconds) {
  std::ostringstream out;
  FakeClock clock;
  auto opts = options(ProgressStyle::lines, 30, 1, clock.function());
  opts.line_seconds = 10.0;
  ProgressDisplay progress(out, opts);
  for (int64_t step = 1; step <= 30; ++step) {
    progress.train_step(step, {{"loss", 1.0}});
    clock.now += 3.0;  // each step takes 3 s: a line at steps 1, 5, 9, ... (12 s apart), and the last
  }
  std::vector<int64_t> printed;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) printed.push_back(std::stoll(line.substr(5, line.find('/') - 5)));
  EXPECT_EQ(printed, (std::vector<int64_t>{1, 5, 9, 13, 17, 21, 25, 29, 30}));
}

TEST(MetricsProgressDisplay, PlainLinesShowEveryValueAndMemory) {
  std::ostringstream out;
  FakeClock clock;
  auto opts = options(ProgressStyle::lines, 0, 1, clock.function());
  opts.memory_bytes = [] { return uint64_t{1288490189}; };  // 1.2 GiB
  ProgressDisplay progress(out, opts);
  // Known values come first in a fixed order; the rest follow in the order given.
  progress.train_step(7, {{"kl", 0.0123456}, {"grad_norm", 1.23456}, {"loss", 0.5}});
  EXPECT_EQ(out.str(), "step 7 | loss 0.5000 | grad_norm 1.235 | kl 0.01235 | mem 1.20 GiB\n");
}

TEST(MetricsProgressDisplay, EtaUsesTheMovingAverageOfRecentSteps) {
  std::ostringstream out;
  FakeClock clock;
  auto opts = options(ProgressStyle::lines, 100, 1000, clock.function());
  opts.eta_window = 4;
  ProgressDisplay progress(out, opts);
  // Ten slow steps (10 s each) then five fast ones (1 s each): the window of 4 forgets the slow ones.
  int64_t step = 0;
  for (int i = 0; i < 10; ++i, clock.now += 10.0) progress.train_step(++step, {});
  EXPECT_DOUBLE_EQ(progress.mean_step_seconds(), 10.0);
  for (int i = 0; i < 5; ++i) {
    clock.now += 1.0;
    progress.train_step(++step, {});
  }
  EXPECT_DOUBLE_EQ(progress.mean_step_seconds(), 1.0);
  EXPECT_EQ(out.str(), "");  // log_every 1000: nothing printed
}

TEST(MetricsProgressDisplay, InPlaceBarRedrawsOneLine) {
  std::ostringstream out;
  FakeClock clock;
  ProgressDisplay progress(out, options(ProgressStyle::in_place, 3, 10, clock.function()));
  progress.train_step(1, {{"loss", 12.5}, {"other", 1.0}});
  clock.now += 30.0;
  progress.train_step(2, {{"loss", 1.5}});
  progress.eval(2, {{"eval_loss", 1.75}});
  clock.now += 30.0;
  progress.train_step(3, {{"loss", 1.25}});
  progress.finish();
  progress.finish();  // nothing drawn any more: no second newline
  const std::string bar1 = "step 1/3 | loss 12.5000";  // the bar leaves out values it does not know
  const std::string bar2 = "step 2/3 | loss 1.5000 | ETA 30s";
  const std::string bar3 = "step 3/3 | loss 1.2500 | ETA 0s";
  EXPECT_EQ(out.str(), "\r" + bar1 +
                           "\r" + bar2 +
                           "\r" + std::string(bar2.size(), ' ') + "\r" + "eval step 2 | eval_loss 1.7500\n" +
                           "\r" + bar3 + "\n");
}

TEST(MetricsProgressDisplay, ShorterBarOverwritesTheLongerOne) {
  std::ostringstream out;
  FakeClock clock;
  ProgressDisplay progress(out, options(ProgressStyle::in_place, 0, 1, clock.function()));
  progress.train_step(1, {{"loss", 100.0}});
  progress.train_step(2, {{"loss", 1.0}});
  EXPECT_EQ(out.str(), "\rstep 1 | loss 100.0000\rstep 2 | loss 1.0000  ");
}

}  // namespace
}  // namespace ferry
