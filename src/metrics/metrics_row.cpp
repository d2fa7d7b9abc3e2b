// Lookups and sanity checks on a step's named values.
#include "src/metrics/metrics_row.h"

#include <unordered_set>

#include "core/error.h"

namespace ferry {

std::optional<double> find_metric(const MetricValues& values, std::string_view name) {
  for (const auto& v : values) {
    if (v.name == name) return v.value;
  }
  return std::nullopt;
}

void check_metric_names(const MetricValues& values) {
  std::unordered_set<std::string_view> seen;
  for (const auto& v : values) {
    FERRY_CHECK(!v.name.empty(), "a metric has an empty name");
    FERRY_CHECK(v.name != "step", "'step' is written by the logger, not passed as a metric");
    FERRY_CHECK(seen.insert(v.name).second, "metric '", v.name, "' is given twice in one row");
  }
}

}  // namespace ferry
