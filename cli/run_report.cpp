// A run's or a pipeline's report page and PNGs (see run_report.h).
#include "cli/run_report.h"

#include <ctime>
#include <sstream>
#include <string>

#include "cli/pipeline_record.h"
#include "cli/pipeline_summary.h"
#include "cli/svg_to_png.h"
#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/report_page.h"
#include "src/metrics/run_charts.h"

namespace ferry::cli {

namespace fs = std::filesystem;

namespace {

std::string local_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

// The subfolders of `folder` that hold a run, for the message when `folder` itself holds none.
std::string runs_below(const fs::path& folder) {
  std::string names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (!entry.is_directory() || !holds_metrics(entry.path())) continue;
    names += (names.empty() ? "" : ", ") + entry.path().filename().string();
  }
  return names;
}

// A PNG name's part from a stage ("train-sft" -> "sft").
std::string short_command(const std::string& command) {
  return command.starts_with("train-") ? command.substr(6) : command;
}

struct PageAndPngNames {
  ReportPage page;
  std::vector<std::string> png_prefixes;  // per section: "" for a run, "1-sft-" for a pipeline's stage
};

PageAndPngNames pipeline_page(const fs::path& folder, const PipelineRecord& record) {
  PageAndPngNames built;
  built.page.title = "Ferry pipeline report: " + (record.config.empty() ? folder.string() : record.config);
  std::vector<StageOutcome> outcomes;
  size_t logged = 0;
  for (size_t i = 0; i < record.stages.size(); ++i) {
    const PipelineStageRecord& stage = record.stages[i];
    ReportSection section;
    section.dir = folder / stage.folder;
    section.heading = std::to_string(i + 1) + ". " + stage.command + (stage.title.empty() ? "" : " (" + stage.title + ")") +
                      ": " + stage.output_dir + (stage.state == "running" ? " (running)" : "") +
                      (stage.reused ? " (reused)" : "");
    StageOutcome outcome{stage.command, stage.output_dir, nullptr, stage.reused, stage.eval_file};
    if (holds_metrics(section.dir)) {
      section.run = read_run_record(section.dir);
      ++logged;
      if (section.run->result.is_object() && section.run->result.contains("figures")) {
        outcome.figures = section.run->result.at("figures");
      }
    }
    built.page.sections.push_back(std::move(section));
    built.png_prefixes.push_back(std::to_string(i + 1) + "-" + short_command(stage.command) + "-");
    outcomes.push_back(std::move(outcome));
  }
  if (logged == 0) {
    throw InputError(pipeline_record_path_in(folder).string() + " lists " + std::to_string(record.stages.size()) +
                     " stage(s) and none has a metrics.jsonl yet (looked in " +
                     (folder / record.stages.front().folder).string() +
                     (record.stages.size() > 1 ? " ..." : "") + "); run the pipeline first, or use --watch to wait");
  }
  std::ostringstream summary;
  print_pipeline_summary(summary, outcomes);
  std::string text = summary.str();
  text.erase(0, text.find_first_not_of('\n'));
  built.page.pipeline_summary = text;
  return built;
}

PageAndPngNames build_page(const fs::path& folder) {
  if (!fs::is_directory(folder)) {
    throw InputError(folder.string() + ": no such folder; give a run's output.dir or a pipeline's folder");
  }
  if (auto record = read_pipeline_record(folder); record && !record->stages.empty()) {
    return pipeline_page(folder, *record);
  }
  if (!holds_metrics(folder)) {
    const std::string below = runs_below(folder);
    throw InputError(folder.string() + ": no metrics.jsonl here (not a run's output.dir) and no pipeline.json (not a "
                     "pipeline's folder)" +
                     (below.empty() ? std::string("; give the output.dir of a run that has logged a step")
                                    : "; these folders in it hold runs: " + below + " (give one of them)"));
  }
  PageAndPngNames built;
  built.page.title = "Ferry run report: " + folder.string();
  built.page.sections.push_back({folder.string(), folder, read_run_record(folder)});
  built.png_prefixes.push_back("");
  return built;
}

}  // namespace

bool has_report_data(const fs::path& folder) {
  if (holds_metrics(folder)) return true;
  const auto record = read_pipeline_record(folder);
  if (!record) return false;
  for (const PipelineStageRecord& stage : record->stages) {
    if (holds_metrics(folder / stage.folder)) return true;
  }
  return false;
}

WrittenReport write_report(const fs::path& folder, const ReportOptions& options) {
  if (!options.png_dir.empty()) require_rsvg_convert();  // before any work
  PageAndPngNames built = build_page(folder);
  built.page.refresh_seconds = options.refresh_seconds;
  built.page.written_at = local_time_now();
  WrittenReport written;
  written.html = options.output.empty() ? folder / "report.html" : options.output;
  const std::string html = render_report_html(built.page);
  write_file_atomic(written.html, html);
  written.html_bytes = html.size();
  for (size_t i = 0; i < built.page.sections.size(); ++i) {
    const ReportSection& section = built.page.sections[i];
    if (!section.run) continue;
    const std::vector<RunChart> charts = run_charts(*section.run, /*standalone_svg=*/true);
    written.charts += charts.size();
    if (options.png_dir.empty()) continue;
    std::error_code ec;
    fs::create_directories(options.png_dir, ec);
    if (ec) throw InputError("--png " + options.png_dir.string() + ": cannot create the folder: " + ec.message());
    for (const RunChart& chart : charts) {
      const fs::path png = options.png_dir / (built.png_prefixes[i] + chart.id + ".png");
      write_png_from_svg(chart.svg, png);
      written.pngs.push_back(png);
    }
  }
  return written;
}

}  // namespace ferry::cli
