// A Mixture of Experts' router figures over an RL learner's micro-batches (BackboneRunner::
// router_metrics after each: moe_aux_loss, moe_load_imbalance), logged as their means beside the
// learner's own; empty for a dense policy.
#pragma once

#include <cstdint>

#include "src/metrics/metrics_row.h"

namespace ferry::rl {

struct RouterTally {
  MetricValues sums;
  int64_t batches = 0;

  void add(const MetricValues& values) {
    if (values.empty()) return;
    if (sums.empty()) {
      sums = values;
    } else {
      for (size_t i = 0; i < sums.size() && i < values.size(); ++i) sums[i].value += values[i].value;
    }
    ++batches;
  }
  // Appends the means to `out`.
  void append_means(MetricValues& out) const {
    for (const MetricValue& v : sums) out.push_back({v.name, v.value / static_cast<double>(batches)});
  }
};

}  // namespace ferry::rl
