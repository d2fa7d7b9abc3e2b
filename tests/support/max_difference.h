// The largest difference between a run's numbers and a reference's, for tests that compare within
// a tolerance. A reduction written as `worst = std::max(worst, d)` drops NaN (std::max(w, NaN) is
// w), so a run whose weights or losses went NaN would pass `EXPECT_LE(worst, tolerance)`. These
// return NaN as soon as any compared value is NaN or infinite, the sizes or names differ, or there
// is nothing to compare: EXPECT_LE(x, tol), EXPECT_LT, EXPECT_EQ(x, 0.0) and EXPECT_GT(x, 0.0)
// all fail on NaN. Checked by tests/unit/support_max_difference_test.cpp.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>

#include "src/io/safetensors.h"

namespace ferry::test_support {

inline constexpr double kNotComparable = std::numeric_limits<double>::quiet_NaN();

// max(worst, d) that keeps a NaN from either side (std::max keeps `worst` when d is NaN).
inline double max_keeping_nan(double worst, double d) {
  if (std::isnan(worst) || std::isnan(d)) return kNotComparable;
  return std::max(worst, d);
}

// Largest |a[i] - b[i]| over two sequences of numbers (vectors, arrays) of the same length; NaN if
// any a[i] or b[i] is not finite, the lengths differ or they are empty.
template <class A, class B>
double max_abs_difference(const A& a, const B& b) {
  if (std::size(a) != std::size(b) || std::size(a) == 0) return kNotComparable;
  double worst = 0;
  for (size_t i = 0; i < std::size(a); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) return kNotComparable;
    worst = std::max(worst, std::abs(x - y));
  }
  return worst;
}

// Largest |a[i] - b[i]| / |b[i]| (b is the reference), as max_abs_difference; a b[i] of 0 counts
// as an infinite relative difference unless a[i] is 0 too.
template <class A, class B>
double max_relative_difference(const A& a, const B& b) {
  if (std::size(a) != std::size(b) || std::size(a) == 0) return kNotComparable;
  double worst = 0;
  for (size_t i = 0; i < std::size(a); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) return kNotComparable;
    if (x == y) continue;
    worst = std::max(worst, std::abs(x - y) / std::abs(y));
  }
  return worst;
}

// Largest |a - b| over the elements of two tensors of the same shape (any dtype and device,
// compared in double on the CPU); NaN if either holds a NaN or infinity, the shapes differ, either
// is undefined or they are empty.
inline double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes() || a.numel() == 0) return kNotComparable;
  const at::Tensor x = a.detach().to(torch::kCPU, torch::kDouble), y = b.detach().to(torch::kCPU, torch::kDouble);
  if (!torch::isfinite(x).all().item<bool>() || !torch::isfinite(y).all().item<bool>()) return kNotComparable;
  return (x - y).abs().max().item<double>();
}

// Largest difference between same-named tensors of two maps with the same names (weights of two
// runs); NaN if the names differ, a map is empty or any pair is not comparable.
inline double max_abs_difference(const io::TensorMap& a, const io::TensorMap& b) {
  if (a.size() != b.size() || a.empty()) return kNotComparable;
  double worst = 0;
  for (const auto& [name, t] : a) {
    const auto other = b.find(name);
    if (other == b.end()) return kNotComparable;
    worst = max_keeping_nan(worst, max_abs_difference(t, other->second));
  }
  return worst;
}

}  // namespace ferry::test_support
