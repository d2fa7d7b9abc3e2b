// Axis ranges and tick labels for report charts: ticks at 1, 2 or 5 times a power of ten, the
// range widened to whole ticks, labels as short as the tick spacing allows ("0.25", "2e-4",
// "15000"). A range of one value (a constant series, a single point) is widened around it so the
// curve sits in the middle; integer axes (steps) never get a tick spacing below 1.
#pragma once

#include <string>
#include <vector>

namespace ferry {

struct ChartAxis {
  double lo = 0.0;              // the axis ends: the first and last tick
  double hi = 1.0;
  double spacing = 0.2;         // between ticks
  std::vector<double> ticks;    // lo, lo + spacing, ..., hi

  // Where `value` falls along the axis: 0 at lo, 1 at hi.
  double fraction(double value) const { return (value - lo) / (hi - lo); }
};

// An axis covering [lo, hi] (finite, lo <= hi) with about `target_ticks` intervals.
ChartAxis nice_axis(double lo, double hi, int target_ticks = 5, bool integer = false);

// The label of a tick at `value` on an axis with tick `spacing`: enough digits to tell
// neighbouring ticks apart, plain notation for spacings in [1e-3, 1e5), else "2.5e-4" style.
std::string format_tick(double value, double spacing);

}  // namespace ferry
