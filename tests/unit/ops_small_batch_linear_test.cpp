// The decode-step linear (kernels/ops/small_batch_linear.h) against at::linear: the transposed
// product for a few rows without gradients, at::linear itself otherwise (gradients on, many rows).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "kernels/ops/small_batch_linear.h"

namespace ferry {
namespace {

TEST(SmallBatchLinear, EqualsLinearForAFewRows) {
  torch::manual_seed(0);
  const torch::Tensor weight = torch::randn({300, 96}), bias = torch::randn({300});
  torch::NoGradGuard no_grad;
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{1, 96}, {16, 1, 96}, {2, 64, 96}}) {
    const torch::Tensor x = torch::randn(shape);
    for (const torch::Tensor& b : {torch::Tensor(), bias}) {
      const torch::Tensor got = kernels::small_batch_linear(x, weight, b);
      const torch::Tensor want = at::linear(x, weight, b);
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_TRUE(got.is_contiguous());
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-5 * want.abs().max().item<double>());
    }
  }
}

TEST(SmallBatchLinear, KeepsGradientsAndLargeBatchesOnLinear) {
  const torch::Tensor weight = torch::randn({40, 24}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 24});
  const torch::Tensor y = kernels::small_batch_linear(x, weight);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(torch::allclose(weight.grad(), x.sum(0).unsqueeze(0).expand({40, 24})));
  torch::NoGradGuard no_grad;
  const torch::Tensor many = torch::randn({kernels::kSmallBatchRows + 1, 24});
  EXPECT_TRUE(torch::equal(kernels::small_batch_linear(many, weight), at::linear(many, weight)));
}

}  // namespace
}  // namespace ferry
