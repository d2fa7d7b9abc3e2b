// NF4 CUDA dequantisation (kernels/cuda/nf4_dequant.h) against the CPU definition
// (kernels/cpu/nf4.h), bit for bit: fp32/bf16/fp16 output, edge sizes, blocksizes 32/64/4096,
// non-finite blocks, and the nested absmax. Skips when no GPU is visible.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/nf4.h"
#if defined(FERRY_WITH_CUDA)
#include "kernels/cuda/nf4_dequant.h"
#endif

namespace ferry::kernels {
namespace {

#if defined(FERRY_WITH_CUDA)

torch::Tensor to_gpu(const void* data, int64_t bytes) {
  auto host = torch::empty({bytes}, torch::kByte);
  if (bytes) std::memcpy(host.data_ptr(), data, size_t(bytes));
  return host.to(torch::kCUDA);
}

cuda::ElementType cuda_type(Nf4ValueType type) {
  return type == Nf4ValueType::f32 ? cuda::ElementType::f32
         : type == Nf4ValueType::bf16 ? cuda::ElementType::bf16 : cuda::ElementType::f16;
}

TEST(Nf4Gpu, DequantiseEqualsCpuBitwise) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  std::mt19937 rng(18);
  std::normal_distribution<float> normal;
  for (int64_t n : {1, 2, 63, 64, 65, 4097, 1000003}) {
    for (int64_t blocksize : {32, 64, 4096}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = normal(rng) * 3;
      if (n > 200) {
        x[5] = std::numeric_limits<float>::quiet_NaN();                  // block 0: NaN
        x[blocksize + 1] = -std::numeric_limits<float>::infinity();      // block 1: inf
        x[x.size() - 1] = 1e-39f;                                        // subnormal products
      }
      std::vector<uint8_t> packed(size_t(nf4_packed_bytes(n)));
      std::vector<float> absmax(size_t(nf4_blocks(n, blocksize)));
      nf4_quantize_reference(x.data(), Nf4ValueType::f32, n, blocksize, packed.data(), absmax.data());
      const auto packed_gpu = to_gpu(packed.data(), int64_t(packed.size()));
      const auto absmax_gpu = to_gpu(absmax.data(), int64_t(absmax.size() * 4));
      for (Nf4ValueType type : {Nf4ValueType::f32, Nf4ValueType::bf16, Nf4ValueType::f16}) {
        const int64_t bytes = n * nf4_value_bytes(type);
        std::vector<uint8_t> want(static_cast<size_t>(bytes));
        nf4_dequantize_reference(packed.data(), absmax.data(), n, blocksize, want.data(), type);
        auto out = torch::full({bytes}, 0x5a, torch::TensorOptions(torch::kByte).device(torch::kCUDA));
        cuda::nf4_dequantize(packed_gpu.data_ptr<uint8_t>(), reinterpret_cast<const float*>(absmax_gpu.data_ptr()), n,
                             blocksize, cuda_type(type), out.data_ptr(), nullptr);
        const auto got = out.cpu();
        EXPECT_EQ(std::memcmp(got.data_ptr(), want.data(), size_t(bytes)), 0)
            << "n " << n << " blocksize " << blocksize << " type " << int(type);
      }
    }
  }
}

TEST(Nf4Gpu, UnnestEqualsCpuBitwise) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.001f, 2.0f);
  for (int64_t blocks : {1, 256, 257, 70000}) {
    std::vector<float> absmax(static_cast<size_t>(blocks));
    for (auto& a : absmax) a = uniform(rng);
    const float offset = nf4_absmax_offset(absmax.data(), blocks);
    std::vector<uint8_t> q(static_cast<size_t>(blocks));
    std::vector<float> absmax2(size_t(nf4_blocks(blocks, 256))), want(static_cast<size_t>(blocks));
    nf4_nest_absmax(absmax.data(), blocks, offset, q.data(), absmax2.data());
    nf4_unnest_absmax(q.data(), absmax2.data(), offset, blocks, want.data());
    const auto q_gpu = to_gpu(q.data(), blocks);
    const auto a2_gpu = to_gpu(absmax2.data(), int64_t(absmax2.size() * 4));
    const auto code_gpu = to_gpu(nf4_dynamic_code(), 256 * 4);
    auto out = torch::empty({blocks}, torch::TensorOptions(torch::kFloat).device(torch::kCUDA));
    cuda::nf4_unnest_absmax(q_gpu.data_ptr<uint8_t>(), reinterpret_cast<const float*>(a2_gpu.data_ptr()), offset,
                            blocks, 256, reinterpret_cast<const float*>(code_gpu.data_ptr()), out.data_ptr<float>(),
                            nullptr);
    const auto got = out.cpu();
    EXPECT_EQ(std::memcmp(got.data_ptr(), want.data(), want.size() * 4), 0) << blocks;
  }
}

#else

TEST(Nf4Gpu, DequantiseEqualsCpuBitwise) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no GPU visible";
  FAIL() << "a GPU is visible but the CUDA kernels are not compiled in (FERRY_CUDA=OFF?)";
}

#endif

}  // namespace
}  // namespace ferry::kernels
