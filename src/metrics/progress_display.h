// Console progress for training: what a person watching the run reads.
//
//   in_place (a terminal): one line redrawn with '\r' every step,
//     step 12/100 | loss 2.3456 | lr 2.00e-05 | grad_norm 0.812 | 5120 tok/s | mem 1.27 GiB | ETA 2m14s
//   lines (a log file, CI): the same text plus any other values as a full line every `log_every`
//     steps (the first one, then at most one per `line_seconds`) and at the last step, so logs
//     stay short and greppable.
// Evaluation results always get their own full line. ETA = mean step time over the last
// `eta_window` steps times the steps left; shown once two steps have been seen and the total is known.
// Output goes to an injected stream and time comes from an injected clock, so tests see exact text.
#pragma once

#include <optional>

#include <cstdint>
#include <deque>
#include <functional>
#include <ostream>
#include <string>
#include <utility>

#include "src/metrics/metrics_clock.h"
#include "src/metrics/metrics_row.h"

namespace ferry {

enum class ProgressStyle { in_place, lines };

struct ProgressOptions {
  ProgressStyle style = ProgressStyle::lines;
  int64_t total_steps = 0;  // 0 or less: unknown (no "/total", no ETA)
  int64_t log_every = 1;    // lines style: print every N steps...
  double line_seconds = 0;  // ...at most one line per this many seconds (0: no limit); the last always
  SecondsClock clock = monotonic_seconds;
  std::function<uint64_t()> memory_bytes;  // device memory in use; unset or 0: not shown
  size_t eta_window = 20;                  // steps in the moving average of step time
};

class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream& out, ProgressOptions options);

  // Called every training step (it times steps even when it prints nothing).
  void train_step(int64_t step, const MetricValues& values);

  // An evaluation result, on its own line.
  void eval(int64_t step, const MetricValues& values);

  // Ends an in-place bar with a newline so later output starts on a fresh line.
  void finish();

  // Seconds per step averaged over the window; 0 before two steps were seen.
  double mean_step_seconds() const;

 private:
  std::string step_text(int64_t step, const MetricValues& values, bool all_values) const;
  void draw_in_place(const std::string& text);
  void clear_in_place();

  std::ostream& out_;
  ProgressOptions options_;
  std::deque<std::pair<int64_t, double>> recent_;  // (step, clock) of the last eta_window + 1 steps
  size_t drawn_width_ = 0;                         // characters of the in-place bar now on screen
  std::optional<double> last_line_time_;           // clock when the last step line was printed
};

// "45s", "3m05s", "2h03m": a duration as people read an ETA.
std::string format_eta(double seconds);

}  // namespace ferry
