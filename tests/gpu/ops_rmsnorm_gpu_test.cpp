// RMSNorm CUDA kernel against the reference formula on the same GPU tensors (fp32, bf16, fp16,
// odd widths). Skips when no GPU is visible.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/ops/rmsnorm.h"

namespace ferry {
namespace {

TEST(RmsNormGpu, KernelMatchesReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  ASSERT_TRUE(kernels::rms_norm_uses_cuda_kernel(torch::zeros({1}, torch::kCUDA)))
      << "a GPU is visible but the CUDA kernels are not compiled in (FERRY_CUDA=OFF?)";
  torch::manual_seed(0);
  for (int64_t cols : {1, 31, 64, 257, 4096, 5000}) {
    for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      const auto x = torch::randn({7, 3, cols}, torch::kCUDA).to(dtype);
      const auto w = torch::randn({cols}, torch::kCUDA).to(dtype);
      const auto fast = kernels::rms_norm(x, w, 1e-6);
      const auto ref = kernels::rms_norm_reference(x, w, 1e-6);
      const double tol = dtype == torch::kFloat ? 1e-5 : 2e-2;
      EXPECT_TRUE(torch::allclose(fast.to(torch::kFloat), ref.to(torch::kFloat), tol, tol))
          << "cols=" << cols << " dtype=" << dtype << " max diff "
          << (fast.to(torch::kFloat) - ref.to(torch::kFloat)).abs().max().item<float>();
    }
  }
}

TEST(RmsNormGpu, EmptyInput) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  const auto x = torch::randn({0, 64}, torch::kCUDA);
  EXPECT_EQ(kernels::rms_norm(x, torch::ones({64}, torch::kCUDA), 1e-6).numel(), 0);
}

}  // namespace
}  // namespace ferry
