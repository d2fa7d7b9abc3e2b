// metrics.jsonl read back as curves: one series per logged key (loss, eval_loss, lr, reward/mean, ...),
// each the (step, value) points of the rows that hold that key, in file order. This is what
// `ferry report` draws; keys keep the order in which they first appear in the file.
//
//   MetricsSeries run = read_metrics_series(dir / "metrics.jsonl");
//   for (const Series& s : run.series) ... s.name, s.points, s.non_finite_steps
//
// A value the run logged as null (NaN or an infinity: metrics_jsonl.h writes them so) is no point;
// its step is kept in `non_finite_steps`, so a chart can break the curve there and say how many
// values it lacks. A last line without
// its newline is a row still being written (a live run) and is left out; any other line that is
// not a JSON object with an integer "step" and number or null values is an InputError naming
// file:line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

struct SeriesPoint {
  int64_t step = 0;
  double value = 0.0;
};

struct Series {
  std::string name;                 // the key in metrics.jsonl
  std::vector<SeriesPoint> points;  // finite values only, in file order
  std::vector<int64_t> non_finite_steps;  // steps of rows that logged this key as null (NaN, +-inf)
};

struct MetricsSeries {
  std::vector<Series> series;  // in order of each key's first appearance
  size_t rows = 0;             // complete rows read
  int64_t last_step = 0;       // the largest step of any row (0 when there is none)

  // The series called `name`, or nullptr.
  const Series* find(std::string_view name) const;
};

// Parses metrics.jsonl text; `source` names the file in error messages.
MetricsSeries parse_metrics_series(std::string_view text, const std::string& source);

// Reads and parses a metrics.jsonl file; InputError naming it when it cannot be read.
MetricsSeries read_metrics_series(const std::filesystem::path& path);

}  // namespace ferry
