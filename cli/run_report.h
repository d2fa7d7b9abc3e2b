// Writing `ferry report`'s page for a folder: a run's output.dir (its metrics.jsonl) or a
// pipeline's folder (its pipeline.json, pipeline_record.h: a section per stage and the pipeline's
// summary table, pipeline_summary.h), optionally with one PNG per chart (svg_to_png.h). Shared by
// `ferry report` and by `ferry pipeline`, which writes the report of its folder at its end.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <vector>

namespace ferry::cli {

struct ReportOptions {
  std::filesystem::path output;         // empty: FOLDER/report.html
  std::filesystem::path png_dir;        // empty: no PNGs
  std::optional<int> refresh_seconds;   // --watch: the page reloads itself
};

struct WrittenReport {
  std::filesystem::path html;
  size_t html_bytes = 0;
  size_t charts = 0;
  std::vector<std::filesystem::path> pngs;
};

// True when `folder` has something to report: a metrics.jsonl, or a pipeline.json with a stage
// that has one. (--watch waits until it does.)
bool has_report_data(const std::filesystem::path& folder);

// Writes the page (atomically) and the PNGs. InputError (exit 2) naming the folder when it has
// nothing to report, naming file:line for a corrupt metrics line, with the apt-get line when
// --png needs rsvg-convert and it is missing.
WrittenReport write_report(const std::filesystem::path& folder, const ReportOptions& options);

}  // namespace ferry::cli
