// metrics.jsonl: one JSON object per logged row, e.g.
//   {"step":12,"loss":2.3125,"lr":2e-05,"grad_norm":0.81,"tokens_per_s":5120.0}
//   {"step":100,"eval_loss":2.05}
// Keys keep the order the loop gave; NaN and infinities are written as null (JSON has no such
// numbers) with the key kept, so a diverging run is still visible. The file is opened in append
// mode and every line is flushed, so `tail -f` works and a resumed run continues the same file.
//
// Resuming: a run that crashed after its last checkpoint (step N) left rows with step > N that the
// resumed run will write again. Call truncate_metrics_jsonl(path, N) before reopening the file;
// MetricsLogger does this when given the resume step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "src/metrics/metrics_row.h"

namespace ferry {

// The JSON line for one row, without the newline.
std::string format_metrics_json_line(const MetricsRow& row);

class MetricsJsonlWriter {
 public:
  // Opens `path` for appending (creating it and its folder). Throws InputError when it cannot.
  explicit MetricsJsonlWriter(const std::filesystem::path& path);

  // Appends one line and flushes it to the operating system.
  void write(const MetricsRow& row);
  void close();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

// Rewrites `path` (atomically) keeping only rows with step <= last_step, and drops lines cut off by a
// crash (a final line without newline, or a line that is not valid JSON). Returns how many lines
// were removed; a missing file is fine (returns 0). Throws InputError naming file:line when a valid
// JSON line is not an object with an integer "step" (not a file Ferry wrote).
size_t truncate_metrics_jsonl(const std::filesystem::path& path, int64_t last_step);

}  // namespace ferry
