// The clocks metrics read, passed in as functions so tests can run on fixed, fake time.
#pragma once

#include <functional>

namespace ferry {

// Returns seconds; which epoch depends on the clock.
using SecondsClock = std::function<double()>;

// Seconds since the Unix epoch (wall time: TensorBoard timestamps, event file names).
double unix_time_seconds();

// Seconds on a clock that never jumps (step timing, ETA).
double monotonic_seconds();

}  // namespace ferry
