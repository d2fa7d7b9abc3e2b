// The tests' largest-difference helpers (tests/support/max_difference.h, and offload_training.h's
// worst_relative / worst_weight_difference built on them) report NaN whenever a compared value is
// NaN or infinite, wherever it sits (first, middle, last element; run or reference side), so no
// tolerance check passes a run whose numbers broke. The reduction they replace,
// `worst = std::max(worst, d)`, drops a NaN d.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/support/max_difference.h"
#include "tests/support/offload_training.h"

namespace ferry::test_support {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<double> kRun = {1.0, 2.0, 3.0, 4.0, 5.0};
const std::vector<double> kReference = {1.0, 2.5, 3.0, 4.0, 4.0};

TEST(MaxDifference, TheOldReductionDropsNan) {
  // Why the helpers exist: std::max(worst, NaN) is worst, so a NaN anywhere but first vanished.
  double worst = 0;
  for (double d : {0.1, kNan, 0.2}) worst = std::max(worst, d);
  EXPECT_EQ(worst, 0.2);
  EXPECT_TRUE(std::isnan(max_keeping_nan(max_keeping_nan(0.1, kNan), 0.2)));
  EXPECT_TRUE(std::isnan(max_keeping_nan(kNan, 0.2)));
  EXPECT_EQ(max_keeping_nan(0.1, 0.2), 0.2);
}

TEST(MaxDifference, FiniteNumbersGiveTheLargestDifference) {
  EXPECT_DOUBLE_EQ(max_abs_difference(kRun, kReference), 1.0);
  EXPECT_DOUBLE_EQ(max_relative_difference(kRun, kReference), 0.25);  // |5 - 4| / 4
  EXPECT_EQ(max_abs_difference(kRun, kRun), 0.0);
  EXPECT_EQ(max_relative_difference(std::vector<double>{0.0}, std::vector<double>{0.0}), 0.0);
  EXPECT_EQ(max_relative_difference(std::vector<double>{1.0}, std::vector<double>{0.0}), kInf);
  const std::vector<float> floats = {1.0f, 2.0f};
  EXPECT_DOUBLE_EQ(max_abs_difference(floats, std::vector<double>{1.0, 2.5}), 0.5);
}

TEST(MaxDifference, NanOrInfinityAnywhereInEitherSequenceIsNan) {
  for (const double bad : {kNan, kInf, -kInf}) {
    for (const size_t at : {size_t{0}, size_t{2}, size_t{4}}) {  // first, middle, last
      std::vector<double> run = kRun, reference = kReference;
      run[at] = bad;
      const std::string where = "value " + std::to_string(bad) + " at " + std::to_string(at);
      EXPECT_TRUE(std::isnan(max_abs_difference(run, kReference))) << "run, " << where;
      EXPECT_TRUE(std::isnan(max_relative_difference(run, kReference))) << "run, " << where;
      reference[at] = bad;
      EXPECT_TRUE(std::isnan(max_abs_difference(kRun, reference))) << "reference, " << where;
      EXPECT_TRUE(std::isnan(max_relative_difference(kRun, reference))) << "reference, " << where;
      EXPECT_TRUE(std::isnan(max_abs_difference(run, reference))) << "both, " << where;
    }
  }
  std::vector<float> floats = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(max_abs_difference(floats, std::vector<float>{1.0f, 1.0f})));
}

TEST(MaxDifference, DifferentLengthsOrNothingComparedIsNan) {
  EXPECT_TRUE(std::isnan(max_abs_difference(kRun, std::vector<double>(kRun.begin(), kRun.end() - 1))));
  EXPECT_TRUE(std::isnan(max_relative_difference(std::vector<double>{}, std::vector<double>{})));
  EXPECT_TRUE(std::isnan(max_abs_difference(std::vector<double>{}, std::vector<double>{})));
}

TEST(MaxDifference, EveryToleranceCheckFailsOnTheResult) {
  std::vector<double> run = kRun;
  run[2] = kNan;
  const double worst = max_abs_difference(run, kReference);
  EXPECT_NONFATAL_FAILURE(EXPECT_LE(worst, 1e9), "");
  EXPECT_NONFATAL_FAILURE(EXPECT_LT(worst, 1e9), "");
  EXPECT_NONFATAL_FAILURE(EXPECT_EQ(worst, 0.0), "");
  EXPECT_NONFATAL_FAILURE(EXPECT_GT(worst, 0.0), "");  // "really another state" checks too
}

TEST(MaxDifference, TensorsWithNanOrInfinityAnywhereAreNan) {
  const torch::Tensor run = torch::arange(12, torch::kFloat).reshape({3, 4});
  const torch::Tensor reference = run + 0.5;
  EXPECT_DOUBLE_EQ(max_abs_difference(run, reference), 0.5);
  EXPECT_DOUBLE_EQ(max_abs_difference(run.to(torch::kBFloat16), reference.to(torch::kBFloat16)), 0.5);
  for (const double bad : {kNan, kInf, -kInf}) {
    for (const int64_t at : {int64_t{0}, int64_t{5}, int64_t{11}}) {  // first, middle, last
      torch::Tensor poisoned = run.clone();
      poisoned.view({-1})[at] = bad;
      const std::string where = "value " + std::to_string(bad) + " at " + std::to_string(at);
      EXPECT_TRUE(std::isnan(max_abs_difference(poisoned, reference))) << "run, " << where;
      EXPECT_TRUE(std::isnan(max_abs_difference(reference, poisoned))) << "reference, " << where;
      EXPECT_TRUE(std::isnan(max_abs_difference(poisoned, poisoned))) << "both, " << where;  // inf - inf is NaN anyway
      EXPECT_TRUE(std::isnan(max_abs_difference(poisoned.to(torch::kBFloat16), reference))) << "bf16, " << where;
    }
  }
  EXPECT_TRUE(std::isnan(max_abs_difference(run, reference.reshape({4, 3}))));  // shapes differ
  EXPECT_TRUE(std::isnan(max_abs_difference(run, torch::Tensor())));
  EXPECT_TRUE(std::isnan(max_abs_difference(torch::zeros({0}), torch::zeros({0}))));
}

io::TensorMap weights(double shift) {
  io::TensorMap map;
  for (const char* name : {"a.weight", "m.weight", "z.weight"}) map[name] = torch::full({2, 3}, 1.0 + shift);
  return map;
}

TEST(MaxDifference, WeightMapsWithANonFiniteWeightAnywhereAreNan) {
  EXPECT_DOUBLE_EQ(max_abs_difference(weights(0.25), weights(0)), 0.25);
  for (const double bad : {kNan, kInf}) {
    for (const char* name : {"a.weight", "m.weight", "z.weight"}) {  // first, middle, last tensor
      io::TensorMap poisoned = weights(0);
      poisoned[name] = poisoned[name].clone();
      poisoned[name][1][2] = bad;
      EXPECT_TRUE(std::isnan(max_abs_difference(poisoned, weights(0)))) << name;
      EXPECT_TRUE(std::isnan(max_abs_difference(weights(0), poisoned))) << name;
      // offload_training.h's helper for the offload runs' weights.
      EXPECT_TRUE(std::isnan(offload_test::worst_weight_difference(poisoned, weights(0)))) << name;
      EXPECT_TRUE(std::isnan(offload_test::worst_weight_difference(weights(0), poisoned))) << name;
    }
  }
  io::TensorMap fewer = weights(0);
  fewer.erase("m.weight");
  EXPECT_TRUE(std::isnan(max_abs_difference(fewer, weights(0))));  // names differ
  EXPECT_TRUE(std::isnan(max_abs_difference(weights(0), fewer)));
  io::TensorMap renamed = fewer;
  renamed["n.weight"] = torch::full({2, 3}, 1.0);
  EXPECT_TRUE(std::isnan(max_abs_difference(renamed, weights(0))));
  EXPECT_TRUE(std::isnan(max_abs_difference(io::TensorMap{}, io::TensorMap{})));
}

TEST(MaxDifference, OffloadLossComparisonIsNanWithANonFiniteLoss) {
  for (const double bad : {kNan, kInf}) {
    for (const size_t at : {size_t{0}, size_t{2}, size_t{4}}) {
      std::vector<double> run = kRun, reference = kReference;
      run[at] = bad;
      reference[at] = bad;
      EXPECT_TRUE(std::isnan(offload_test::worst_relative(run, kReference))) << at;
      EXPECT_TRUE(std::isnan(offload_test::worst_relative(kRun, reference))) << at;
    }
  }
  EXPECT_DOUBLE_EQ(offload_test::worst_relative(kRun, kReference), 0.25);
}

}  // namespace
}  // namespace ferry::test_support
