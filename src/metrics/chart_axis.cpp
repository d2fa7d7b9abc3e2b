// Nice tick spacing (1-2-5) and tick labels (see chart_axis.h).
#include "src/metrics/chart_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ferry {

ChartAxis nice_axis(double lo, double hi, int target_ticks, bool integer) {
  FERRY_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "nice_axis needs a finite range lo <= hi");
  target_ticks = std::max(target_ticks, 1);
  if (hi == lo) {  // one value: put it in the middle of a small range around it
    const double pad = integer ? 1.0 : (lo == 0.0 ? 1.0 : std::abs(lo) * 0.1);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  double spacing = (normalized < 1.5 ? 1.0 : normalized < 3.0 ? 2.0 : normalized < 7.0 ? 5.0 : 10.0) * magnitude;
  if (integer) spacing = std::max(spacing, 1.0);
  // Whole ticks around the data; the small slack keeps a value that sits on a tick from adding one.
  const double first = std::floor(lo / spacing + 1e-9);
  const double last = std::ceil(hi / spacing - 1e-9);
  ChartAxis axis;
  axis.spacing = spacing;
  for (double k = first; k <= last + 0.5; k += 1.0) axis.ticks.push_back(k * spacing);
  axis.lo = axis.ticks.front();
  axis.hi = axis.ticks.back();
  return axis;
}

std::string format_tick(double value, double spacing) {
  if (std::abs(value) < spacing * 1e-6) return "0";
  char text[64];
  if (spacing >= 1e-3 && spacing < 1e5) {  // decided by the spacing, so one axis has one notation
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(spacing) + 1e-9)));
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    return text;
  }
  // Scientific: the mantissa keeps the digits down to the spacing's power of ten; "2.5e-04" -> "2.5e-4".
  const int exponent = static_cast<int>(std::floor(std::log10(std::abs(value)) + 1e-9));
  const int spacing_exponent = static_cast<int>(std::floor(std::log10(spacing) + 1e-9));
  const int digits = std::clamp(exponent - spacing_exponent, 0, 15);
  std::snprintf(text, sizeof text, "%.*e", digits, value);
  std::string label = text;
  const size_t e = label.find('e');
  const int printed_exponent = std::atoi(label.c_str() + e + 1);
  return label.substr(0, e) + "e" + std::to_string(printed_exponent);
}

}  // namespace ferry
