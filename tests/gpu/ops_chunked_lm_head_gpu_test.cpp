// The chunked LM head on a GPU: values and gradients against the full-logits formula on the same
// CUDA tensors (fp32: 1e-5 relative; bf16: to bf16 rounding), and the caching allocator's peak
// with and without chunking for a 32k vocabulary at 4 x 1024 tokens. Skips when no GPU is visible.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <iostream>

#include "kernels/ops/chunked_lm_head.h"

namespace ferry {
namespace {

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor a64 = a.to(torch::kCPU, torch::kDouble), b64 = b.to(torch::kCPU, torch::kDouble);
  return (a64 - b64).abs().max().item<double>() / std::max(1.0, b64.abs().max().item<double>());
}

TEST(ChunkedLmHeadGpu, MatchesFullLogitsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  torch::manual_seed(0);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const torch::Tensor hidden0 = torch::randn({1000, 256}, torch::kCUDA).to(dtype);
    const torch::Tensor weight0 = (torch::randn({5003, 256}, torch::kCUDA) * 0.05).to(dtype);
    torch::Tensor targets = torch::randint(0, 5003, {1000}, torch::TensorOptions(torch::kLong).device(torch::kCUDA));
    targets.index_put_({torch::indexing::Slice(0, 50)}, -100);
    const torch::Tensor a = torch::randn({1000}, torch::kCUDA), b = torch::randn({1000}, torch::kCUDA);
    const torch::Tensor h1 = hidden0.detach().requires_grad_(true), w1 = weight0.detach().requires_grad_(true);
    const torch::Tensor h2 = hidden0.detach().requires_grad_(true), w2 = weight0.detach().requires_grad_(true);
    const kernels::LmHeadTokens full = kernels::full_lm_head(h1, w1, targets, 0.9);
    const kernels::LmHeadTokens part = kernels::chunked_lm_head(h2, w2, targets, 0.9, 333, true);
    ((full.logprobs * a).sum() + (full.entropy * b).sum()).backward();
    ((part.logprobs * a).sum() + (part.entropy * b).sum()).backward();
    const double tolerance = dtype == torch::kFloat ? 1e-5 : 3e-2;
    EXPECT_LT(relative_error(part.logprobs, full.logprobs), tolerance) << dtype;
    EXPECT_LT(relative_error(part.entropy, full.entropy), tolerance) << dtype;
    EXPECT_LT(relative_error(h2.grad(), h1.grad()), tolerance) << dtype;
    EXPECT_LT(relative_error(w2.grad(), w1.grad()), tolerance) << dtype;
    const torch::Tensor h3 = hidden0.detach().requires_grad_(true), w3 = weight0.detach().requires_grad_(true);
    const torch::Tensor nll = kernels::lm_head_nll_sum(h3, w3, targets, 333);
    nll.backward();
    EXPECT_LT(relative_error(nll, -full.logprobs.sum()), tolerance) << dtype;
  }
}

TEST(ChunkedLmHeadGpu, AllocatorPeakDropsWithChunks) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  const torch::Tensor hidden0 = torch::randn({4096, 256}, torch::kCUDA);
  const torch::Tensor weight0 = torch::randn({32000, 256}, torch::kCUDA) * 0.05;
  const torch::Tensor targets = torch::randint(0, 32000, {4096}, torch::TensorOptions(torch::kLong).device(torch::kCUDA));
  auto peak_of = [&](int64_t chunk) {
    torch::cuda::synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    const uint64_t before = c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current;
    c10::cuda::CUDACachingAllocator::resetPeakStats(0);
    {
      const torch::Tensor h = hidden0.detach().requires_grad_(true), w = weight0.detach().requires_grad_(true);
      kernels::lm_head_nll_sum(h, w, targets, chunk).backward();
      torch::cuda::synchronize();
    }
    return static_cast<uint64_t>(c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak) - before;
  };
  const uint64_t full = peak_of(0), chunked = peak_of(-1);
  const uint64_t logits = 4096ull * 32000 * 4;
  std::cout << "CUDA allocator peak over the inputs, one NLL forward + backward, 4096 x 32000 fp32: all logits "
            << full << " bytes, chunked " << chunked << " bytes (one logits tensor " << logits << ")\n";
  EXPECT_GT(full, 2 * logits);
  EXPECT_LT(chunked * 4, full);
}

}  // namespace
}  // namespace ferry
