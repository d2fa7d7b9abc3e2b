// Wiring of progress, jsonl and TensorBoard behind log_train / log_eval.
#include "src/metrics/metrics_logger.h"

#include <unistd.h>

#include <iostream>

#include "core/error.h"
#include "src/metrics/metrics_jsonl.h"
#include "src/metrics/progress_display.h"
#include "src/metrics/resume_log.h"
#include "src/metrics/tensorboard_writer.h"

namespace ferry {
namespace {

constexpr std::string_view kEvalPrefix = "eval_";

MetricValues with_tag_prefix(const MetricValues& values, const std::string& prefix) {
  MetricValues tagged;
  tagged.reserve(values.size());
  for (const auto& v : values) tagged.push_back({prefix + v.name, v.value});
  return tagged;
}

// "loss" and "eval_loss" both name the eval loss; give back the bare name.
std::string strip_eval_prefix(const std::string& name) {
  return name.starts_with(kEvalPrefix) ? name.substr(kEvalPrefix.size()) : name;
}

}  // namespace

std::filesystem::path MetricsLogger::jsonl_path_in(const std::filesystem::path& output_dir) {
  return output_dir / "metrics.jsonl";
}

std::filesystem::path MetricsLogger::tensorboard_dir_in(const std::filesystem::path& output_dir) {
  return output_dir / "tb";
}

LoggingConfig logging_for_process(LoggingConfig logging, bool primary) {
  if (!primary) {
    logging.jsonl = false;
    logging.tensorboard = false;
    logging.progress = ProgressMode::never;
  }
  return logging;
}

MetricsLogger::MetricsLogger(const LoggingConfig& config, const std::filesystem::path& output_dir,
                             MetricsLoggerOptions options)
    : log_every_(config.log_every), total_steps_(options.total_steps) {
  if (config.log_every < 1) {
    throw ConfigError("logging.log_every must be at least 1 (got " + std::to_string(config.log_every) + ")");
  }
  if (config.line_seconds < 0) throw ConfigError("logging.line_seconds must be >= 0 (0: a line every log_every steps)");
  std::ostream& console = options.console ? *options.console : std::cout;
  const bool terminal = options.console_is_terminal.value_or(::isatty(STDOUT_FILENO) == 1);
  const bool in_place = config.progress == ProgressMode::always || (config.progress == ProgressMode::auto_ && terminal);
  ProgressOptions progress_options;
  progress_options.style = in_place ? ProgressStyle::in_place : ProgressStyle::lines;
  progress_options.total_steps = options.total_steps;
  progress_options.log_every = config.log_every;
  progress_options.line_seconds = config.line_seconds;
  progress_options.clock = options.monotonic_clock;
  progress_options.memory_bytes = options.memory_bytes;
  progress_ = std::make_unique<ProgressDisplay>(console, std::move(progress_options));

  // Steps after the resumed checkpoint (all steps on a fresh start) will be logged again.
  const int64_t last_kept_step = options.resume_step.value_or(-1);
  if (config.jsonl) {
    truncate_metrics_jsonl(jsonl_path_in(output_dir), last_kept_step);
    jsonl_ = std::make_unique<MetricsJsonlWriter>(jsonl_path_in(output_dir));
    update_resume_log(output_dir, options.resume_step, options.wall_clock());  // resumes.jsonl, for reports
  }
  if (config.tensorboard) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(tensorboard_dir_in(output_dir), options.wall_clock);
    tensorboard_->write_session_start(last_kept_step + 1);
  }
}

MetricsLogger::~MetricsLogger() {
  try {
    close();
  } catch (const std::exception&) {
    // Destructors must not throw; the loop calls close() itself when it wants to see the error.
  }
}

void MetricsLogger::log_train(int64_t step, const MetricValues& values) {
  FERRY_CHECK(!closed_, "log_train after close()");
  check_metric_names(values);
  progress_->train_step(step, values);
  const bool last = total_steps_ > 0 && step == total_steps_;
  if (step % log_every_ != 0 && !last) return;
  if (jsonl_) jsonl_->write({step, values});
  if (tensorboard_) tensorboard_->write_scalars(step, with_tag_prefix(values, "train/"));
}

void MetricsLogger::log_eval(int64_t step, const MetricValues& values) {
  FERRY_CHECK(!closed_, "log_eval after close()");
  check_metric_names(values);
  MetricValues jsonl_values;
  MetricValues tensorboard_values;
  for (const auto& v : values) {
    const std::string bare = strip_eval_prefix(v.name);
    jsonl_values.push_back({std::string(kEvalPrefix) + bare, v.value});
    tensorboard_values.push_back({"eval/" + bare, v.value});
  }
  check_metric_names(jsonl_values);  // "loss" and "eval_loss" together would collide
  progress_->eval(step, jsonl_values);
  if (jsonl_) jsonl_->write({step, jsonl_values});
  if (tensorboard_) tensorboard_->write_scalars(step, tensorboard_values);
}

void MetricsLogger::close() {
  if (closed_) return;
  closed_ = true;
  progress_->finish();
  if (jsonl_) jsonl_->close();
  if (tensorboard_) tensorboard_->close();
}

std::filesystem::path MetricsLogger::jsonl_path() const { return jsonl_ ? jsonl_->path() : std::filesystem::path(); }

std::filesystem::path MetricsLogger::tensorboard_file() const {
  return tensorboard_ ? tensorboard_->path() : std::filesystem::path();
}

}  // namespace ferry
