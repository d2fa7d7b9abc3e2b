// One logged step: the step number and named scalar values, in the order the training loop gave
// them (step, loss, lr, grad_norm, tokens_per_s, ...). Every metrics sink reads this record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

struct MetricValue {
  std::string name;
  double value = 0.0;
};

// Written by the loop as an initializer list: {{"loss", loss}, {"lr", lr}}.
using MetricValues = std::vector<MetricValue>;

struct MetricsRow {
  int64_t step = 0;
  MetricValues values;
};

// The value called `name`, if the row has one.
std::optional<double> find_metric(const MetricValues& values, std::string_view name);

// Throws InternalError when a name is empty, is "step", or appears twice: the loop built a bad row.
void check_metric_names(const MetricValues& values);

}  // namespace ferry
