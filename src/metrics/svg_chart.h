// One report chart drawn as SVG text: a title, a plot frame with y grid lines, ticks and labels on
// both axes (chart_axis.h; x is the step), one polyline per series in its own colour, a legend
// below, and a dashed vertical line at each step the run was resumed from. No scripts, no fonts
// or images from elsewhere: the same text is inlined in the HTML page and rasterised to PNG.
//
// What a reader (or a test) can rely on in the markup:
//   <g class="xtick"><line x1="X" .../><text ...>LABEL</text></g>   a step tick at pixel X
//   <g class="ytick"><line ... y1="Y" .../><text ...>LABEL</text></g> a value tick at pixel Y
//   <polyline data-series="KEY" points="x,y x,y ..."/>               a run of finite points of KEY
//   <line class="resume" data-step="N" .../>                         a resume marker
// A series is cut into several polylines where it logged a non-finite value (those values are
// counted in its legend entry), and a series with more points than the plot has room for keeps,
// per pixel column, its first, lowest, highest and last point: every drawn point is a logged one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/metrics/metrics_series.h"

namespace ferry {

struct ChartInput {
  std::string title;
  std::vector<const Series*> series;                        // drawn in this order
  std::vector<int64_t> resume_steps;                        // dashed markers (those inside the x range)
  std::optional<std::pair<int64_t, int64_t>> step_range;    // the x range to cover; default: the points'
};

struct SvgChartOptions {
  bool standalone = false;  // an SVG file of its own (with the xmlns attribute) rather than inline HTML
  int width = 640;
  int plot_height = 200;
};

std::string draw_svg_chart(const ChartInput& chart, const SvgChartOptions& options = {});

}  // namespace ferry
