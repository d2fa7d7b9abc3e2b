// HTML of the report page (see report_page.h).
#include "src/metrics/report_page.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "core/byte_size.h"
#include "src/metrics/markup_escape.h"
#include "src/metrics/run_charts.h"

namespace ferry {
namespace {

constexpr const char* kStyle = R"(body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em;margin-bottom:4px}h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;margin:4px 0}.note{background:#fff7e0;border-left:4px solid #e0a800;padding:6px 10px;margin:8px 0}
.charts{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;border:1px solid #ddd;border-radius:4px;padding:4px}
svg{max-width:100%;height:auto;display:block}
pre{background:#f6f6f6;padding:10px;overflow:auto;font-size:12px;line-height:1.35}
table{border-collapse:collapse;font-size:14px}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}details{margin:8px 0}summary{cursor:pointer;font-weight:600}
)";

std::string number_text(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

// result.json's figures as (dotted key, JSON value) rows: nested objects flattened
// ("peak_device_bytes.learn"), arrays kept whole.
void flatten(const nlohmann::json& value, const std::string& key, std::vector<std::pair<std::string, nlohmann::json>>& rows) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [name, inner] : value.items()) flatten(inner, key.empty() ? name : key + "." + name, rows);
  } else {
    rows.emplace_back(key, value);
  }
}

bool is_memory_figure(const std::string& key) { return key.find("bytes") != std::string::npos; }

std::string value_cell(const std::string& key, const nlohmann::json& value) {
  if (value.is_number()) {
    const double v = value.get<double>();
    std::string text = value.is_number_integer() ? value.dump() : number_text(v);
    if (is_memory_figure(key) && v >= 0 && std::isfinite(v)) {
      text = format_bytes_approx(static_cast<uint64_t>(v)) + " (" + value.dump() + " bytes)";
    }
    return "<td class=\"num\">" + escape_markup(text) + "</td>";
  }
  return "<td>" + escape_markup(value.is_string() ? value.get<std::string>() : value.dump()) + "</td>";
}

void figure_table(std::ostringstream& html, const std::vector<std::pair<std::string, nlohmann::json>>& rows) {
  html << "<table>\n";
  for (const auto& [key, value] : rows) {
    html << "<tr><th>" << escape_markup(key) << "</th>" << value_cell(key, value) << "</tr>\n";
  }
  html << "</table>\n";
}

std::string resume_note(const std::vector<int64_t>& steps) {
  std::string list;
  for (size_t i = 0; i < steps.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == steps.size() ? " and " : ", ") + std::to_string(steps[i]);
  }
  return std::string("Resumed from the checkpoint") + (steps.size() > 1 ? "s" : "") + " of step" +
         (steps.size() > 1 ? "s " : " ") + list +
         " (dashed lines on the charts): the rows after each of those steps that the interrupted run had logged "
         "were dropped and logged again by the resumed one.";
}

void run_section(std::ostringstream& html, const ReportSection& section, size_t index) {
  html << "<section id=\"run-" << index << "\">\n<h2>" << escape_markup(section.heading) << "</h2>\n";
  if (!section.run) {
    html << "<p class=\"meta\">" << escape_markup(section.dir.string())
         << ": no metrics.jsonl yet (this stage has not logged a step).</p>\n</section>\n";
    return;
  }
  const RunRecord& run = *section.run;
  const std::string stage = run.stage();
  html << "<p class=\"meta\">folder " << escape_markup(run.dir.string());
  if (!stage.empty()) html << " &middot; stage " << escape_markup(stage);
  html << " &middot; " << run.metrics.rows << " rows of metrics.jsonl up to step " << run.metrics.last_step;
  html << (run.result.is_null() ? " &middot; no result.json yet (running, or stopped before its end)" : "")
       << "</p>\n";
  if (!run.resume_steps.empty()) html << "<p class=\"note\">" << escape_markup(resume_note(run.resume_steps)) << "</p>\n";

  const std::vector<RunChart> charts = run_charts(run);
  bool other_heading = false;
  html << "<div class=\"charts\">\n";
  for (const RunChart& chart : charts) {
    if (chart.other && !other_heading) {
      html << "</div>\n<h3>Other series</h3>\n<div class=\"charts\">\n";
      other_heading = true;
    }
    html << "<figure data-chart=\"" << escape_markup(chart.id) << "\">\n" << chart.svg << "\n</figure>\n";
  }
  html << "</div>\n";
  if (charts.empty()) html << "<p class=\"meta\">metrics.jsonl has no values yet.</p>\n";

  if (run.result.is_object() && run.result.contains("figures")) {
    std::vector<std::pair<std::string, nlohmann::json>> rows, memory, other;
    flatten(run.result.at("figures"), "", rows);
    for (auto& row : rows) (is_memory_figure(row.first) ? memory : other).push_back(std::move(row));
    if (!memory.empty()) {
      html << "<h3>Memory</h3>\n<p class=\"meta\">Peaks per tier and phase the run recorded in result.json.</p>\n";
      figure_table(html, memory);
    }
    if (!other.empty()) {
      html << "<h3>Result</h3>\n";
      figure_table(html, other);
    }
  }
  if (!run.memory_plan.empty()) {
    html << "<h3>Memory plan</h3>\n<p class=\"meta\">Where the run put weights, gradients and optimizer state ("
         << escape_markup((run.dir / "memory_plan.txt").string()) << ").</p>\n<pre>" << escape_markup(run.memory_plan)
         << "</pre>\n";
  }
  if (!run.config_yaml.empty()) {
    html << "<details>\n<summary>Resolved config (" << escape_markup((run.dir / "config.yaml").string())
         << ")</summary>\n<pre>" << escape_markup(run.config_yaml) << "</pre>\n</details>\n";
  }
  html << "</section>\n";
}

}  // namespace

std::string render_report_html(const ReportPage& page) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  if (page.refresh_seconds) html << "<meta http-equiv=\"refresh\" content=\"" << *page.refresh_seconds << "\">\n";
  html << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
       << escape_markup(page.title) << "</title>\n<style>\n" << kStyle << "</style>\n</head>\n<body>\n";
  html << "<h1>" << escape_markup(page.title) << "</h1>\n<p class=\"meta\">Written by ferry report"
       << (page.written_at.empty() ? "" : " at " + escape_markup(page.written_at));
  if (page.refresh_seconds) html << "; rewritten while the run goes on, this page reloads every " << *page.refresh_seconds << " s";
  html << ".</p>\n";
  if (!page.pipeline_summary.empty()) {
    html << "<h2>Pipeline summary</h2>\n<pre>" << escape_markup(page.pipeline_summary) << "</pre>\n";
  }
  for (size_t i = 0; i < page.sections.size(); ++i) run_section(html, page.sections[i], i + 1);
  html << "</body>\n</html>\n";
  return html.str();
}

}  // namespace ferry
