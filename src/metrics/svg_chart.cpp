// SVG drawing of one chart (see svg_chart.h).
#include "src/metrics/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "src/metrics/chart_axis.h"
#include "src/metrics/markup_escape.h"

namespace ferry {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kLeft = 72;           // room for the value labels
constexpr int kRight = 20;
constexpr int kTop = 34;            // room for the title
constexpr int kLegendRow = 18;
constexpr double kCharWidth = 6.8;  // a 12 px sans-serif character, on average
constexpr size_t kMarkersUpTo = 40; // series with this few points also get a dot per point

std::string px(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

using Segment = std::vector<SeriesPoint>;

// The finite points of `s`, cut where a non-finite value was logged between two of them; `skipped`
// counts the non-finite values.
std::vector<Segment> segments_of(const Series& s, size_t& skipped) {
  std::vector<int64_t> breaks = s.non_finite_steps;
  std::sort(breaks.begin(), breaks.end());
  skipped = breaks.size();
  std::vector<Segment> segments(1);
  for (const SeriesPoint& p : s.points) {
    if (!std::isfinite(p.value)) {
      ++skipped;
      if (!segments.back().empty()) segments.emplace_back();
      continue;
    }
    Segment& current = segments.back();
    if (!current.empty()) {
      const int64_t a = std::min(current.back().step, p.step), b = std::max(current.back().step, p.step);
      const auto it = std::lower_bound(breaks.begin(), breaks.end(), a);
      if (it != breaks.end() && *it <= b) segments.emplace_back();
    }
    segments.back().push_back(p);
  }
  if (segments.back().empty()) segments.pop_back();
  return segments;
}

// A segment with more points than `columns` pixel columns can show keeps, per column, its first,
// lowest, highest and last point, in their order.
Segment thin_out(const Segment& segment, double x_lo, double x_hi, int columns) {
  if (segment.size() <= static_cast<size_t>(4 * columns)) return segment;
  std::vector<size_t> keep;
  size_t start = 0;
  auto column_of = [&](const SeriesPoint& p) {
    return std::clamp(static_cast<int>((static_cast<double>(p.step) - x_lo) / (x_hi - x_lo) * columns), 0, columns);
  };
  while (start < segment.size()) {
    size_t end = start, low = start, high = start;
    const int column = column_of(segment[start]);
    while (end < segment.size() && column_of(segment[end]) == column) {
      if (segment[end].value < segment[low].value) low = end;
      if (segment[end].value > segment[high].value) high = end;
      ++end;
    }
    for (size_t i : {start, low, high, end - 1}) keep.push_back(i);
    start = end;
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  Segment thinned;
  thinned.reserve(keep.size());
  for (size_t i : keep) thinned.push_back(segment[i]);
  return thinned;
}

}  // namespace

std::string draw_svg_chart(const ChartInput& chart, const SvgChartOptions& options) {
  const int width = options.width;
  const int plot_width = width - kLeft - kRight;
  const int plot_height = options.plot_height;
  const int plot_bottom = kTop + plot_height;

  // Segments per series, and the value and step ranges they cover.
  std::vector<std::vector<Segment>> drawn(chart.series.size());
  std::vector<size_t> skipped(chart.series.size(), 0);
  std::vector<size_t> point_counts(chart.series.size(), 0);
  double y_lo = std::numeric_limits<double>::infinity(), y_hi = -y_lo;
  double x_lo = y_lo, x_hi = -y_lo;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    drawn[i] = segments_of(*chart.series[i], skipped[i]);
    for (const Segment& segment : drawn[i]) {
      point_counts[i] += segment.size();
      for (const SeriesPoint& p : segment) {
        y_lo = std::min(y_lo, p.value);
        y_hi = std::max(y_hi, p.value);
        x_lo = std::min(x_lo, static_cast<double>(p.step));
        x_hi = std::max(x_hi, static_cast<double>(p.step));
      }
    }
  }
  if (chart.step_range) {
    x_lo = std::min(x_lo, static_cast<double>(chart.step_range->first));
    x_hi = std::max(x_hi, static_cast<double>(chart.step_range->second));
  }
  if (!(x_lo <= x_hi)) x_lo = 0, x_hi = 1;
  if (!(y_lo <= y_hi)) y_lo = 0, y_hi = 1;
  const ChartAxis x_axis = nice_axis(x_lo, x_hi, 6, /*integer=*/true);
  const ChartAxis y_axis = nice_axis(y_lo, y_hi, 5);
  auto x_of = [&](double step) { return kLeft + x_axis.fraction(step) * plot_width; };
  auto y_of = [&](double value) { return kTop + (1.0 - y_axis.fraction(value)) * plot_height; };

  // The legend's entries, wrapped into rows under the plot.
  struct LegendEntry {
    std::string text;
    double x = 0;
    int row = 0;
  };
  std::vector<LegendEntry> legend;
  double legend_x = kLeft;
  int legend_row = 0;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    std::string text = chart.series[i]->name;
    if (point_counts[i] == 0) text += " (no finite value)";
    if (skipped[i] > 0) text += " (" + std::to_string(skipped[i]) + " non-finite skipped)";
    const double entry_width = 24 + kCharWidth * static_cast<double>(text.size()) + 16;
    if (legend_x > kLeft && legend_x + entry_width > width - kRight) {
      legend_x = kLeft;
      ++legend_row;
    }
    legend.push_back({text, legend_x, legend_row});
    legend_x += entry_width;
  }
  const int legend_top = plot_bottom + 56;  // the first row's text baseline, under the "step" label
  const int height = legend_top + (legend_row + 1) * kLegendRow;

  std::ostringstream svg;
  svg << "<svg" << (options.standalone ? " xmlns=\"http://www.w3.org/2000/svg\"" : "") << " width=\"" << width
      << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height << "\" role=\"img\" aria-label=\""
      << escape_markup(chart.title) << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"" << width << "\" height=\"" << height << "\" fill=\"#ffffff\"/>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">"
      << escape_markup(chart.title) << "</text>\n";
  for (double tick : y_axis.ticks) {
    const std::string y = px(y_of(tick));
    svg << "<g class=\"ytick\"><line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + plot_width
        << "\" y2=\"" << y << "\" stroke=\"#e6e6e6\"/><text x=\"" << kLeft - 6 << "\" y=\"" << px(y_of(tick) + 4)
        << "\" text-anchor=\"end\" fill=\"#444\">" << format_tick(tick, y_axis.spacing) << "</text></g>\n";
  }
  for (double tick : x_axis.ticks) {
    const std::string x = px(x_of(tick));
    svg << "<g class=\"xtick\"><line x1=\"" << x << "\" y1=\"" << plot_bottom << "\" x2=\"" << x << "\" y2=\""
        << plot_bottom + 4 << "\" stroke=\"#888\"/><text x=\"" << x << "\" y=\"" << plot_bottom + 17
        << "\" text-anchor=\"middle\" fill=\"#444\">" << format_tick(tick, x_axis.spacing) << "</text></g>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_width << "\" height=\"" << plot_height
      << "\" fill=\"none\" stroke=\"#999\"/>\n";
  svg << "<text x=\"" << px(kLeft + plot_width / 2.0) << "\" y=\"" << plot_bottom + 33
      << "\" text-anchor=\"middle\" fill=\"#444\">step</text>\n";
  for (int64_t step : chart.resume_steps) {
    if (step < x_axis.lo || step > x_axis.hi) continue;
    const std::string x = px(x_of(static_cast<double>(step)));
    svg << "<line class=\"resume\" data-step=\"" << step << "\" x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x
        << "\" y2=\"" << plot_bottom << "\" stroke=\"#555\" stroke-dasharray=\"5 4\"/>\n"
        << "<text x=\"" << px(x_of(static_cast<double>(step)) + 3) << "\" y=\"" << kTop + 11
        << "\" font-size=\"10\" fill=\"#555\">resumed from " << step << "</text>\n";
  }
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    const std::string name = escape_markup(chart.series[i]->name);
    for (const Segment& whole : drawn[i]) {
      const Segment segment = thin_out(whole, x_axis.lo, x_axis.hi, plot_width);
      svg << "<polyline data-series=\"" << name << "\" points=\"";
      for (size_t j = 0; j < segment.size(); ++j) {
        svg << (j ? " " : "") << px(x_of(static_cast<double>(segment[j].step))) << "," << px(y_of(segment[j].value));
      }
      svg << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.6\" stroke-linejoin=\"round\"/>\n";
      if (point_counts[i] <= kMarkersUpTo || segment.size() == 1) {
        for (const SeriesPoint& p : segment) {
          svg << "<circle cx=\"" << px(x_of(static_cast<double>(p.step))) << "\" cy=\"" << px(y_of(p.value))
              << "\" r=\"2.6\" fill=\"" << color << "\"/>\n";
        }
      }
    }
  }
  for (size_t i = 0; i < legend.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    const int y = legend_top + legend[i].row * kLegendRow;
    svg << "<g class=\"legend\"><line x1=\"" << px(legend[i].x) << "\" y1=\"" << y - 4 << "\" x2=\""
        << px(legend[i].x + 18) << "\" y2=\"" << y - 4 << "\" stroke=\"" << color
        << "\" stroke-width=\"2.5\"/><text x=\"" << px(legend[i].x + 24) << "\" y=\"" << y << "\" fill=\"#222\">"
        << escape_markup(legend[i].text) << "</text></g>\n";
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace ferry
