// Grouping and drawing a run's series (see run_charts.h).
#include "src/metrics/run_charts.h"

#include <algorithm>
#include <limits>

#include "src/metrics/chart_groups.h"
#include "src/metrics/svg_chart.h"

namespace ferry {

std::vector<RunChart> run_charts(const RunRecord& run, bool standalone_svg) {
  std::vector<std::string> names;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const Series& s : run.metrics.series) {
    names.push_back(s.name);
    for (const SeriesPoint& p : s.points) first = std::min(first, p.step), last = std::max(last, p.step);
    for (int64_t step : s.non_finite_steps) first = std::min(first, step), last = std::max(last, step);
  }
  SvgChartOptions options;
  options.standalone = standalone_svg;
  std::vector<RunChart> charts;
  for (const ChartGroup& group : group_series(names)) {
    ChartInput input;
    input.title = group.title;
    for (const std::string& name : group.series) input.series.push_back(run.metrics.find(name));
    input.resume_steps = run.resume_steps;
    if (first <= last) input.step_range = std::make_pair(first, last);
    charts.push_back({group.id, group.title, group.other, group.series, draw_svg_chart(input, options)});
  }
  return charts;
}

}  // namespace ferry
