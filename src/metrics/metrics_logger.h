// The one object the training loop talks to for metrics: it fans each step out to the console
// progress (progress_display.h), <output.dir>/metrics.jsonl (metrics_jsonl.h) and TensorBoard
// event files in <output.dir>/tb/ (tensorboard_writer.h), as LoggingConfig switches them.
//
//   MetricsLoggerOptions options;
//   options.total_steps = max_steps;
//   options.resume_step = checkpoint_step;  // when resuming
//   options.memory_bytes = [&] { return engine.device_bytes_in_use(); };
//   MetricsLogger metrics(config.logging, config.output.dir, options);
//   for (...) metrics.log_train(step, {{"loss", loss}, {"lr", lr}, {"grad_norm", norm},
//                                      {"tokens_per_s", tps}});
//   metrics.log_eval(step, {{"loss", eval_loss}});
//   metrics.close();
//
// Call log_train every step: the console bar and the ETA use every step, while jsonl rows,
// TensorBoard scalars and plain console lines are written every `logging.log_every` steps and at
// the last step (each row holds that step's values). Eval rows are always written; their names get
// an "eval_" prefix in jsonl ("eval_loss") and an "eval/" tag in TensorBoard ("eval/loss"), train
// values are tagged "train/loss" etc.
//
// Start and resume: rows a previous run left with step > resume_step (every row on a fresh start)
// are removed from metrics.jsonl, and the new event file begins with a SessionLog START at
// resume_step + 1 (0 on a fresh start), which makes TensorBoard hide the older files' events from
// that step on. So a crashed-and-resumed run, or a rerun into the same output.dir, shows each step
// once. With jsonl on, <output.dir>/resumes.jsonl records each resume's step (resume_log.h) for
// `ferry report`, which marks it on the curves.
//
// One logger per run, used from the training thread (it is not thread-safe). With several
// processes (data parallel), only rank 0 should create one: they would share output.dir.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>

#include "core/config/config.h"
#include "src/metrics/metrics_clock.h"
#include "src/metrics/metrics_row.h"

namespace ferry {

class MetricsJsonlWriter;
class TensorBoardWriter;
class ProgressDisplay;

struct MetricsLoggerOptions {
  int64_t total_steps = 0;             // optimizer steps of the whole run (0: unknown, no ETA)
  std::optional<int64_t> resume_step;  // step of the checkpoint resumed from; nullopt: fresh start
  std::ostream* console = nullptr;     // progress output; nullptr: std::cout
  std::optional<bool> console_is_terminal;  // nullopt: isatty(stdout); set it with an injected console
  SecondsClock monotonic_clock = monotonic_seconds;
  SecondsClock wall_clock = unix_time_seconds;
  std::function<uint64_t()> memory_bytes;  // device memory in use, shown by the progress display
};

// `logging` for one process of a data-parallel run: rank 0 (`primary`) reports for the run; the
// others write no metrics files and show no progress.
LoggingConfig logging_for_process(LoggingConfig logging, bool primary);

class MetricsLogger {
 public:
  MetricsLogger(const LoggingConfig& config, const std::filesystem::path& output_dir,
                MetricsLoggerOptions options = {});
  ~MetricsLogger();  // closes, swallowing errors; call close() to see them
  MetricsLogger(const MetricsLogger&) = delete;
  MetricsLogger& operator=(const MetricsLogger&) = delete;

  void log_train(int64_t step, const MetricValues& values);
  void log_eval(int64_t step, const MetricValues& values);
  void close();

  // Where the sinks write; empty when switched off.
  std::filesystem::path jsonl_path() const;
  std::filesystem::path tensorboard_file() const;

  // The files inside an output folder.
  static std::filesystem::path jsonl_path_in(const std::filesystem::path& output_dir);
  static std::filesystem::path tensorboard_dir_in(const std::filesystem::path& output_dir);

 private:
  int64_t log_every_;
  int64_t total_steps_;
  std::unique_ptr<ProgressDisplay> progress_;
  std::unique_ptr<MetricsJsonlWriter> jsonl_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  bool closed_ = false;
};

}  // namespace ferry
