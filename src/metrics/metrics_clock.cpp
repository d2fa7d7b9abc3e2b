// Real clocks behind SecondsClock.
#include "src/metrics/metrics_clock.h"

#include <chrono>

namespace ferry {

double unix_time_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace ferry
