// ggml block quantisers (kernels/cpu/ggml_quantize.h) without a reference program: every SIMD path
// and the threaded entry point equal the definition bit for bit (sizes from one block to an odd
// number of super-blocks, so the AVX-512 K path's lone last block is hit; hostile values), blocks
// worked out by hand for Q4_0, Q8_0 and an all-zero Q6_K block, the levels each K type can reach,
// and argument checks. Bit-equality with llama.cpp itself: tests/parity/kernels_ggml_quantize_parity_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/ggml_quantize.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

const GgmlQuantType kAllTypes[] = {GgmlQuantType::q4_0, GgmlQuantType::q5_0, GgmlQuantType::q5_1, GgmlQuantType::q8_0,
                                   GgmlQuantType::q4_k, GgmlQuantType::q5_k, GgmlQuantType::q6_k};

std::vector<uint8_t> quantized(GgmlQuantType type, const std::vector<float>& x) {
  const GgmlQuantBlock block = ggml_quant_block(type);
  return std::vector<uint8_t>(x.size() / size_t(block.elements) * size_t(block.bytes), 0xCD);
}

// Gaussian values with a few hostile ones mixed in: zero and constant stretches, outliers, tiny and
// subnormal values, values beyond fp16's range.
std::vector<float> hostile_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % 997;
    if (k < 40) x[size_t(i)] = 0.f;
    else if (k < 80) x[size_t(i)] = 0.375f;
    else if (k == 81) x[size_t(i)] *= 100.f;
    else if (k < 100) x[size_t(i)] *= 1e-30f;
    else if (k < 110) x[size_t(i)] = 1e-41f * float(k - 104);
    else if (k == 111) x[size_t(i)] = 7e4f;
    else if (k > 900) x[size_t(i)] = std::round(x[size_t(i)] * 8.f) / 8.f;  // ties
  }
  return x;
}

TEST(GgmlQuantize, EveryPathAndThreadCountEqualsTheDefinition) {
  ThreadPool one(1), two(2), three(3);
  for (const int64_t superblocks : {1, 2, 3, 5, 64, 257}) {
    const std::vector<float> x = hostile_values(superblocks * 256, uint32_t(superblocks));
    for (const GgmlQuantType type : kAllTypes) {
      std::vector<uint8_t> want = quantized(type, x);
      ggml_quantize_reference(type, x.data(), int64_t(x.size()), want.data());
      for (const SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
        if (!cpu_supports(level)) continue;
        std::vector<uint8_t> got = quantized(type, x);
        ggml_quantize_at(level, type, x.data(), int64_t(x.size()), got.data());
        EXPECT_EQ(got, want) << ggml_quant_type_name(type) << ", " << superblocks << " super-blocks, "
                             << simd_level_name(level);
      }
      for (ThreadPool* pool : {&one, &two, &three}) {
        std::vector<uint8_t> got = quantized(type, x);
        ggml_quantize(type, x.data(), int64_t(x.size()), got.data(), pool);
        EXPECT_EQ(got, want) << ggml_quant_type_name(type) << ", " << superblocks << " super-blocks, "
                             << pool->num_threads() << " threads";
      }
    }
  }
}

// Q4_0 by hand: the value of largest magnitude, -2 (the first of -2 and 2), gives d = -2 / -8 = 0.25,
// q = min(15, (int)(x / 0.25 + 8.5)): -2 -> 0, 2 -> 16 -> 15, 0.3 -> 9 (9.7), -0.13 -> 7 (7.98).
TEST(GgmlQuantize, Q4_0BlockByHand) {
  std::vector<float> x(32, 0.f);
  x[0] = -2.f;
  x[1] = 0.3f;
  x[16] = 2.f;
  x[17] = -0.13f;
  std::vector<uint8_t> y = quantized(GgmlQuantType::q4_0, x);
  ggml_quantize(GgmlQuantType::q4_0, x.data(), 32, y.data());
  EXPECT_EQ(y[0], 0x00);  // fp16 0.25 = 0x3400, little-endian
  EXPECT_EQ(y[1], 0x34);
  EXPECT_EQ(y[2 + 0], 0x00 | (15 << 4));  // x[0] low nibble, x[16] high nibble
  EXPECT_EQ(y[2 + 1], 9 | (7 << 4));
  EXPECT_EQ(y[2 + 2], 8 | (8 << 4));  // zeros: (int)8.5 = 8
}

// Q8_0 by hand: d = amax / 127, q = roundf(x / d) (halves away from zero).
TEST(GgmlQuantize, Q8_0BlockByHand) {
  std::vector<float> x(32, 0.f);
  x[0] = 1.27f;
  x[1] = -0.005f;  // about -0.5
  x[2] = 0.635f;   // about 63.5
  std::vector<uint8_t> y = quantized(GgmlQuantType::q8_0, x);
  ggml_quantize(GgmlQuantType::q8_0, x.data(), 32, y.data());
  const float d = 1.27f / 127.f;
  EXPECT_EQ(int8_t(y[2]), 127);
  EXPECT_EQ(int8_t(y[3]), int(std::roundf(-0.005f * (1.f / d))));
  EXPECT_EQ(int8_t(y[4]), int(std::roundf(0.635f * (1.f / d))));
}

// A Q6_K block whose sub-blocks are all below GROUP_MAX_EPS is written as 210 zero bytes; the K types
// keep every level in range: Q4_K's nibbles, Q5_K's fifth bits and Q6_K's 6-bit values decode to
// 0..15 / 0..31 / 0..63 by construction, and a block of one repeated value gives one level.
TEST(GgmlQuantize, ZeroAndConstantKBlocks) {
  std::vector<float> tiny(256, 1e-20f);
  std::vector<uint8_t> q6 = quantized(GgmlQuantType::q6_k, tiny);
  ggml_quantize(GgmlQuantType::q6_k, tiny.data(), 256, q6.data());
  EXPECT_EQ(q6, std::vector<uint8_t>(210, 0));

  std::vector<float> constant(256, -1.5f);
  std::vector<uint8_t> q4 = quantized(GgmlQuantType::q4_k, constant);
  ggml_quantize(GgmlQuantType::q4_k, constant.data(), 256, q4.data());
  for (int i = 16; i < 144; ++i) EXPECT_EQ(q4[size_t(i)], q4[16]) << "Q4_K level byte " << i;
}

TEST(GgmlQuantize, RejectsPartialBlocksAndNullBuffers) {
  std::vector<float> x(300, 1.f);
  std::vector<uint8_t> out(1024);
  EXPECT_THROW(ggml_quantize(GgmlQuantType::q4_k, x.data(), 300, out.data()), InternalError);
  EXPECT_THROW(ggml_quantize(GgmlQuantType::q4_0, x.data(), 33, out.data()), InternalError);
  EXPECT_THROW(ggml_quantize(GgmlQuantType::q4_0, nullptr, 32, out.data()), InternalError);
  EXPECT_NO_THROW(ggml_quantize(GgmlQuantType::q6_k, x.data(), 0, nullptr));
  EXPECT_EQ(ggml_quant_block(GgmlQuantType::q5_k).bytes, 176);
  EXPECT_STREQ(ggml_quant_type_name(GgmlQuantType::q5_1), "Q5_1");
}

}  // namespace
}  // namespace ferry::kernels
