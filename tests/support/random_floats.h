// Normal random floats for the kernel tests: n values of N(0, scale²), the same for the same seed.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ferry::test_support {

inline std::vector<float> random_floats(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& x : out) x = normal(rng);
  return out;
}

}  // namespace ferry::test_support
