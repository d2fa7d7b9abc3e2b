// A run's charts, ready to show: its series grouped (chart_groups.h), each group drawn
// (svg_chart.h) over the run's whole step range with its resume markers, so the charts of one run
// line up. The HTML page inlines them; `ferry report --png` rasterises the standalone ones.
#pragma once

#include <string>
#include <vector>

#include "src/metrics/run_record.h"

namespace ferry {

struct RunChart {
  std::string id;     // chart_groups.h's id: a file name for its PNG
  std::string title;
  bool other = false; // a group of keys the grouping table does not know
  std::vector<std::string> series;
  std::string svg;
};

std::vector<RunChart> run_charts(const RunRecord& run, bool standalone_svg = false);

}  // namespace ferry
