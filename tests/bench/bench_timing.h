// What the kernel benchmarks share: the best of several timed runs after a warm-up, and splitting a
// flag's list ("1,2", "4096x4096") into its items.
#pragma once

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

namespace ferry::bench {

// The fastest of `reps` runs of fn, in seconds, after one untimed run (page faults, caches).
template <class Fn>
double best_seconds(int reps, Fn&& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// "a,b,,c" split at `sep`, empty items left out.
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace ferry::bench
