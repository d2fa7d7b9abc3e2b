// RMSNorm entry point on the CPU: the reference against a formula written out here, in each dtype.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/ops/rmsnorm.h"

namespace ferry {
namespace {

// y_i = w_i * x_i / sqrt(mean_j x_j^2 + eps), computed in double, one row at a time.
torch::Tensor naive_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto xd = x.to(torch::kDouble).reshape({-1, x.size(-1)});
  auto wd = w.to(torch::kDouble);
  auto out = torch::empty_like(xd);
  for (int64_t r = 0; r < xd.size(0); ++r) {
    double sum = 0;
    for (int64_t c = 0; c < xd.size(1); ++c) sum += xd[r][c].item<double>() * xd[r][c].item<double>();
    const double scale = 1.0 / std::sqrt(sum / xd.size(1) + eps);
    for (int64_t c = 0; c < xd.size(1); ++c) out[r][c] = wd[c].item<double>() * xd[r][c].item<double>() * scale;
  }
  return out.reshape(x.sizes());
}

TEST(RmsNorm, ReferenceMatchesFormulaFp32) {
  torch::manual_seed(0);
  const auto x = torch::randn({3, 5, 37});
  const auto w = torch::randn({37});
  const auto y = kernels::rms_norm(x, w, 1e-6);
  EXPECT_EQ(y.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(y.to(torch::kDouble), naive_rms_norm(x, w, 1e-6), 1e-5, 1e-6));
}

TEST(RmsNorm, HalfPrecisionRoundsLikeTransformers) {
  // transformers normalises in fp32, casts to the input dtype, then multiplies by the weight.
  torch::manual_seed(1);
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    const auto x = torch::randn({4, 64}).to(dtype);
    const auto w = (torch::rand({64}) + 0.5).to(dtype);
    const auto y = kernels::rms_norm(x, w, 1e-5);
    ASSERT_EQ(y.scalar_type(), dtype);
    const auto normed = naive_rms_norm(x.to(torch::kFloat), torch::ones({64}), 1e-5).to(torch::kFloat).to(dtype);
    const auto expected = w * normed;
    EXPECT_TRUE(torch::equal(y, expected));
  }
}

TEST(RmsNorm, GradientFlowsThroughReference) {
  const auto x = torch::randn({2, 16}, torch::requires_grad());
  const auto w = torch::randn({16}, torch::requires_grad());
  kernels::rms_norm(x, w, 1e-6).sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
}

}  // namespace
}  // namespace ferry
