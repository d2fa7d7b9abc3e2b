// The HTML page of `ferry report`: one self-contained file (inline CSS and SVG, no scripts, nothing
// fetched), for one run or for a pipeline. Per run: a line on what it is (folder, stage, rows,
// last step, where it was resumed), its charts (run_charts.h; groups the table does not know
// under "Other series"), result.json's figures with the memory peaks in a table of their own, the
// memory plan (memory_plan.txt) and the resolved config in a <pre>. A pipeline adds its summary
// table first and a section per stage; a stage that has not logged yet gets a line saying so. With `refresh_seconds` the page reloads
// itself (ferry report --watch); otherwise it has no refresh.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "src/metrics/run_record.h"

namespace ferry {

struct ReportSection {
  std::string heading;              // "train-sft: runs/demo/sft", or the run's folder
  std::filesystem::path dir;
  std::optional<RunRecord> run;     // nullopt: nothing logged there yet
};

struct ReportPage {
  std::string title;                // the page's <title> and <h1>
  std::string pipeline_summary;     // `ferry pipeline`'s closing table as text; empty for one run
  std::vector<ReportSection> sections;
  std::optional<int> refresh_seconds;
  std::string written_at;           // shown under the title, e.g. "2025-12-07 20:21:05"
};

std::string render_report_html(const ReportPage& page);

}  // namespace ferry
