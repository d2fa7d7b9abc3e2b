// NF4 kernels (kernels/cpu/nf4.h, nf4_state.h) on their own: the code books, threaded = reference
// bit for bit, round-trip error bounds, edge sizes, zero and non-finite blocks, the offset's
// summation order against libtorch's own x.mean(), the quant-state JSON, and argument errors.
// Bit-exactness against bitsandbytes itself is tests/parity/kernels_nf4_parity_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/nf4_state.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

constexpr Nf4ValueType kTypes[] = {Nf4ValueType::f32, Nf4ValueType::bf16, Nf4ValueType::f16};

// n values of `type` (raw bytes), normal with a per-block scale spread over decades.
std::vector<uint8_t> random_values(Nf4ValueType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<uint8_t> bytes(size_t(n * nf4_value_bytes(type)));
  float scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 64 == 0) scale = std::exp(normal(rng));
    const float v = normal(rng) * scale;
    if (type == Nf4ValueType::f32) std::memcpy(bytes.data() + 4 * i, &v, 4);
    else {
      const uint16_t h = type == Nf4ValueType::bf16 ? float_to_bf16(v) : float_to_fp16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

float value_at(const std::vector<uint8_t>& bytes, Nf4ValueType type, int64_t i) {
  if (type == Nf4ValueType::f32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return type == Nf4ValueType::bf16 ? bf16_to_float(h) : fp16_to_float(h);
}

struct Quantised {
  std::vector<uint8_t> packed;
  std::vector<float> absmax;
};

Quantised quantise(const std::vector<uint8_t>& x, Nf4ValueType type, int64_t n, int64_t blocksize,
                   ThreadPool* pool = nullptr, bool reference = true) {
  Quantised q{std::vector<uint8_t>(size_t(nf4_packed_bytes(n)), 0xaa),
              std::vector<float>(size_t(nf4_blocks(n, blocksize)), -1.0f)};
  if (reference) nf4_quantize_reference(x.data(), type, n, blocksize, q.packed.data(), q.absmax.data());
  else nf4_quantize(x.data(), type, n, blocksize, q.packed.data(), q.absmax.data(), pool);
  return q;
}

bool same_bytes(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

TEST(Nf4, CodeBooks) {
  const float* code = nf4_code();
  EXPECT_EQ(code[0], -1.0f);
  EXPECT_EQ(code[7], 0.0f);
  EXPECT_EQ(code[15], 1.0f);
  EXPECT_FLOAT_EQ(code[8], 0.07958029955625534f);
  EXPECT_FLOAT_EQ(code[1], -0.6961928009986877f);
  EXPECT_TRUE(std::is_sorted(code, code + 16));
  const float* dynamic = nf4_dynamic_code();
  EXPECT_TRUE(std::is_sorted(dynamic, dynamic + 256));
  EXPECT_EQ(dynamic[255], 1.0f);
  EXPECT_GT(dynamic[0], -1.0f);  // bnb's signed dynamic map stops at -0.9922
  EXPECT_EQ(std::count(dynamic, dynamic + 256, 0.0f), 1);
}

TEST(Nf4, ThreadedEqualsReferenceBitwise) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {int64_t(1), int64_t(63), int64_t(64), int64_t(65), int64_t(4097), int64_t(1000003)}) {
      for (Nf4ValueType type : kTypes) {
        for (int64_t blocksize : {int64_t(64), int64_t(32), int64_t(4096)}) {
          SCOPED_TRACE(testing::Message() << "threads " << threads << " n " << n << " type " << int(type)
                                          << " blocksize " << blocksize);
          const auto x = random_values(type, n, uint32_t(n + blocksize));
          const Quantised ref = quantise(x, type, n, blocksize);
          const Quantised fast = quantise(x, type, n, blocksize, &pool, false);
          ASSERT_EQ(ref.packed, fast.packed);
          ASSERT_TRUE(same_bytes(ref.absmax.data(), fast.absmax.data(), ref.absmax.size() * 4));
          for (Nf4ValueType out_type : kTypes) {
            std::vector<uint8_t> a(size_t(n * nf4_value_bytes(out_type)), 1), b(a.size(), 2);
            nf4_dequantize_reference(ref.packed.data(), ref.absmax.data(), n, blocksize, a.data(), out_type);
            nf4_dequantize(ref.packed.data(), ref.absmax.data(), n, blocksize, b.data(), out_type, &pool);
            ASSERT_EQ(a, b) << "out type " << int(out_type);
          }
        }
      }
    }
  }
}

TEST(Nf4, EverySimdPathEqualsReferenceBitwise) {
  // Random codes and scales that reach bf16/fp16 subnormals and fp16 overflow, NaN and inf scales.
  std::mt19937 rng(9);
  for (int64_t n : {1, 15, 16, 17, 63, 64, 65, 4097, 100003}) {
    for (int64_t blocksize : {32, 64, 128, 4096}) {
      std::vector<uint8_t> packed(size_t(nf4_packed_bytes(n)));
      for (auto& b : packed) b = uint8_t(rng());
      std::vector<float> absmax(size_t(nf4_blocks(n, blocksize)));
      for (size_t b = 0; b < absmax.size(); ++b) {
        const float magnitude[] = {1.0f, 3e-39f, 2e-7f, 7e4f, 1e30f};
        absmax[b] = magnitude[b % 5] * std::exp(float(rng() % 1000) / 500.0f);
      }
      if (absmax.size() > 6) {
        absmax[5] = std::numeric_limits<float>::quiet_NaN();
        absmax[6] = std::numeric_limits<float>::infinity();
      }
      for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
        if (!cpu_supports(level)) continue;
        for (Nf4ValueType type : kTypes) {
          std::vector<uint8_t> want(static_cast<size_t>(n * nf4_value_bytes(type)), 1), got(want.size(), 2);
          nf4_dequantize_reference(packed.data(), absmax.data(), n, blocksize, want.data(), type);
          nf4_dequantize_at(level, packed.data(), absmax.data(), n, blocksize, got.data(), type);
          ASSERT_EQ(want, got) << simd_level_name(level) << " n " << n << " blocksize " << blocksize << " type "
                               << int(type);
        }
      }
    }
  }
}

TEST(Nf4, EverySimdQuantisePathEqualsReferenceBitwise) {
  // Random blocks, plus blocks of exact midpoints (ties), NaN, inf, subnormal and zero blocks.
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  const float* code = nf4_code();
  for (int64_t n : {1, 16, 31, 32, 33, 63, 64, 65, 4097, 100003}) {
    for (int64_t blocksize : {32, 64, 128, 4096}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t block = i / blocksize, j = i % blocksize;
        float v = normal(rng) * std::exp(normal(rng));
        switch (block % 6) {
          case 1: v = j == 0 ? 2.5f : 2.5f * (code[j % 15] + code[j % 15 + 1]) / 2; break;  // ties
          case 2: v = j == 3 ? std::numeric_limits<float>::quiet_NaN() : v; break;
          case 3: v = j == 5 ? -std::numeric_limits<float>::infinity() : v; break;
          case 4: v *= 1e-39f; break;
          case 5: v = 0.0f; break;
          default: break;
        }
        x[size_t(i)] = v;
      }
      for (Nf4ValueType type : kTypes) {
        std::vector<uint8_t> bytes(static_cast<size_t>(n * nf4_value_bytes(type)));
        for (int64_t i = 0; i < n; ++i) {
          if (type == Nf4ValueType::f32) {
            std::memcpy(bytes.data() + 4 * i, &x[size_t(i)], 4);
          } else {
            const uint16_t h = type == Nf4ValueType::bf16 ? float_to_bf16(x[size_t(i)]) : float_to_fp16(x[size_t(i)]);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
          }
        }
        const Quantised want = quantise(bytes, type, n, blocksize);
        for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
          if (!cpu_supports(level)) continue;
          Quantised got{std::vector<uint8_t>(want.packed.size(), 0xaa), std::vector<float>(want.absmax.size(), -1)};
          nf4_quantize_at(level, bytes.data(), type, n, blocksize, got.packed.data(), got.absmax.data());
          ASSERT_EQ(want.packed, got.packed) << simd_level_name(level) << " n " << n << " blocksize " << blocksize
                                             << " type " << int(type);
          ASSERT_TRUE(same_bytes(want.absmax.data(), got.absmax.data(), want.absmax.size() * 4))
              << simd_level_name(level) << " n " << n << " blocksize " << blocksize << " type " << int(type);
        }
      }
    }
  }
}

TEST(Nf4, RoundTripWithinHalfTheLargestCodeGap) {
  // The largest gap between NF4 codes is -1 to -0.6962: every value dequantises within half of it
  // times its block's absmax, and the block's largest |x| comes back exactly.
  const float* code = nf4_code();
  float half_gap = 0;
  for (int j = 0; j < 15; ++j) half_gap = std::max(half_gap, (code[j + 1] - code[j]) / 2);
  EXPECT_NEAR(half_gap, 0.1519f, 1e-4f);
  for (Nf4ValueType type : kTypes) {
    const int64_t n = 4097, blocksize = 64;
    const auto x = random_values(type, n, 7);
    const Quantised q = quantise(x, type, n, blocksize);
    std::vector<float> out(static_cast<size_t>(n));
    nf4_dequantize(q.packed.data(), q.absmax.data(), n, blocksize, out.data(), Nf4ValueType::f32);
    double squared = 0, total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = value_at(x, type, i), am = q.absmax[size_t(i / blocksize)];
      ASSERT_LE(std::fabs(out[size_t(i)] - v), half_gap * am * (1 + 1e-6f)) << i;
      if (std::fabs(v) == am) {
        EXPECT_EQ(std::fabs(out[size_t(i)]), am) << i;
      }
      squared += double(out[size_t(i)] - v) * (out[size_t(i)] - v);
      total += double(v) * v;
    }
    // NF4's relative RMS error on normal data is ~0.1.
    EXPECT_LT(std::sqrt(squared / total), 0.12) << int(type);
  }
}

TEST(Nf4, EdgeSizesPackHighNibbleFirst) {
  // Codes 15 (1.0) and 0 (-1.0) alternate: element 2i is the high nibble of byte i.
  for (int64_t n : {1, 2, 63, 64, 65, 4097}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = i % 2 ? -2.0f : 2.0f;
    std::vector<uint8_t> bytes(x.size() * 4);
    std::memcpy(bytes.data(), x.data(), bytes.size());
    const Quantised q = quantise(bytes, Nf4ValueType::f32, n, 64);
    ASSERT_EQ(int64_t(q.packed.size()), (n + 1) / 2);
    for (int64_t i = 0; i + 1 < n; i += 2) ASSERT_EQ(q.packed[size_t(i / 2)], 0xf0) << n << " " << i;
    if (n % 2) {
      EXPECT_EQ(q.packed.back(), 0xf7) << n;  // odd n: the pad nibble is code 7 (zero)
    }
    for (float am : q.absmax) EXPECT_EQ(am, 2.0f);
  }
}

TEST(Nf4, ZeroBlocks) {
  // A full all-zero block stores absmax 0; bnb clamps the partial last block's to 1e-38f.
  const int64_t n = 64 + 10;
  std::vector<uint8_t> zeros(size_t(n * 4), 0);
  const Quantised q = quantise(zeros, Nf4ValueType::f32, n, 64);
  EXPECT_EQ(q.absmax[0], 0.0f);
  EXPECT_EQ(q.absmax[1], 1e-38f);
  for (uint8_t b : q.packed) EXPECT_EQ(b, 0x77);
  std::vector<float> out(size_t(n), 1.0f);
  nf4_dequantize(q.packed.data(), q.absmax.data(), n, 64, out.data(), Nf4ValueType::f32);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(Nf4, NonFiniteBlocksAsBitsandbytes) {
  // Block 0 holds a NaN, block 1 an inf, block 2 is finite (documented in nf4.h).
  std::vector<float> x(192, 0.5f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[64 + 5] = std::numeric_limits<float>::infinity();
  x[130] = 1.0f;
  std::vector<uint8_t> bytes(x.size() * 4);
  std::memcpy(bytes.data(), x.data(), bytes.size());
  const Quantised q = quantise(bytes, Nf4ValueType::f32, 192, 64);
  EXPECT_TRUE(std::isnan(q.absmax[0]));
  EXPECT_EQ(q.absmax[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(q.absmax[2], 1.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q.packed[size_t(i)], 0xff) << i;
  EXPECT_EQ(q.packed[32 + 2], 0x7f);  // elements 68 (finite: code 7) and 69 (inf: code 15)
  EXPECT_EQ(q.packed[32], 0x77);
  std::vector<float> out(192);
  nf4_dequantize(q.packed.data(), q.absmax.data(), 192, 64, out.data(), Nf4ValueType::f32);
  for (int i = 0; i < 128; ++i) {
    if (i == 69) {
      EXPECT_EQ(out[size_t(i)], std::numeric_limits<float>::infinity());
    } else {
      EXPECT_TRUE(std::isnan(out[size_t(i)])) << i;
    }
  }
  for (int i = 128; i < 192; ++i) EXPECT_TRUE(std::isfinite(out[size_t(i)]));
  std::vector<uint16_t> bf16(192);
  nf4_dequantize(q.packed.data(), q.absmax.data(), 192, 64, bf16.data(), Nf4ValueType::bf16);
  EXPECT_EQ(bf16[0], 0x7fc0);
}

TEST(Nf4, NestedAbsmaxRoundTrip) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(0.01f, 4.0f);
  // Within half the dynamic code's largest step (0.9/64 near +-1) of the nested block's absmax, plus
  // the lookup table's resolution (2/65535).
  const float* dynamic = nf4_dynamic_code();
  float half_step = 0;
  for (int j = 0; j < 255; ++j) half_step = std::max(half_step, (dynamic[j + 1] - dynamic[j]) / 2);
  EXPECT_NEAR(half_step, 0.9f / 128, 1e-4f);
  for (int64_t blocks : {1, 255, 256, 257, 5000}) {
    std::vector<float> absmax(static_cast<size_t>(blocks));
    for (auto& a : absmax) a = uniform(rng);
    const float offset = nf4_absmax_offset(absmax.data(), blocks);
    std::vector<uint8_t> q(static_cast<size_t>(blocks));
    std::vector<float> absmax2(size_t(nf4_blocks(blocks, 256))), back(static_cast<size_t>(blocks));
    nf4_nest_absmax(absmax.data(), blocks, offset, q.data(), absmax2.data());
    nf4_unnest_absmax(q.data(), absmax2.data(), offset, blocks, back.data());
    for (int64_t i = 0; i < blocks; ++i) {
      ASSERT_LE(std::fabs(back[size_t(i)] - absmax[size_t(i)]),
                absmax2[size_t(i / 256)] * (half_step + 2.0f / 65535) + 1e-6f)
          << blocks << " " << i;
    }
  }
  // A nested block whose values all equal the offset stores absmax2 0 and codes 0.
  std::vector<float> same(10, 2.5f);
  std::vector<uint8_t> q(10, 9);
  float absmax2 = -1;
  nf4_nest_absmax(same.data(), 10, 2.5f, q.data(), &absmax2);
  EXPECT_EQ(absmax2, 0.0f);
  EXPECT_EQ(q, std::vector<uint8_t>(10, 0));
}

TEST(Nf4, OffsetSumsInLibtorchOrder) {
  // x.mean() of this very libtorch, for its thread count, bit for bit. 8 lanes whatever the CPU:
  // torch's float sum runs its 8-lane kernel on AVX-512 CPUs too (16 failed on an AVX-512 EPYC).
  const int lanes = 8;
  const int saved = at::get_num_threads();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(0.0f, 3.0f);
  int differs_from_one_thread = 0;
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    for (int64_t n : {1, 3, 7, 8, 9, 33, 100, 4097, 32767, 32768, 32769, 40000, 100003, 300000}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = uniform(rng) * std::exp(uniform(rng) * 3);
      const float want = torch::from_blob(x.data(), {n}).mean().item<float>();
      const float got = nf4_absmax_offset(x.data(), n, {lanes, threads});
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << "n " << n << " threads " << threads << ": " << got << " vs " << want;
      differs_from_one_thread += got != nf4_absmax_offset(x.data(), n, {lanes, 1});
    }
  }
  at::set_num_threads(saved);
  EXPECT_GT(differs_from_one_thread, 0) << "no case tells the thread split apart";
}

TEST(Nf4State, JsonRoundTripAndPythonFormatting) {
  Nf4QuantState s;
  s.shape = {96, 200};
  s.dtype = Nf4ValueType::bf16;
  EXPECT_EQ(nf4_quant_state_json(s), R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [96, 200]})");
  s.nested = true;
  s.nested_offset = 0.1304052770137787f;
  EXPECT_EQ(nf4_quant_state_json(s),
            R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [96, 200], )"
            R"("nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.1304052770137787})");
  const auto back = nf4_parse_quant_state(nf4_quant_state_json(s), "w");
  EXPECT_EQ(back.shape, s.shape);
  EXPECT_EQ(back.dtype, s.dtype);
  EXPECT_TRUE(back.nested);
  EXPECT_EQ(back.nested_offset, s.nested_offset);
  EXPECT_EQ(back.numel(), 19200);
  EXPECT_EQ(back.blocks(), 300);
  EXPECT_EQ(back.nested_blocks(), 2);
  // json.dumps(float(np.float32(v))) in Python: exponent form below 1e-4 and from 1e16.
  const std::pair<float, const char*> formats[] = {
      {1e-05f, "9.999999747378752e-06"}, {0.0001f, "9.999999747378752e-05"}, {0.5f, "0.5"},
      {3.0f, "3.0"}, {-2.0f, "-2.0"}, {1e16f, "1.0000000272564224e+16"}, {123456.0f, "123456.0"},
      {0.001f, "0.0010000000474974513"}, {0.0f, "0.0"}};
  for (const auto& [value, text] : formats) {
    s.nested_offset = value;
    const std::string json = nf4_quant_state_json(s);
    EXPECT_NE(json.find(std::string("\"nested_offset\": ") + text + "}"), std::string::npos) << json;
  }
}

TEST(Nf4State, RejectsWhatItCannotLoad) {
  const std::string good = R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": [4, 8]})";
  EXPECT_EQ(nf4_parse_quant_state(good, "w").dtype, Nf4ValueType::f16);
  EXPECT_FALSE(nf4_parse_quant_state(good, "w").nested);
  for (const std::string& bad : {
           std::string("{not json"),
           std::string(R"({"quant_type": "fp4", "blocksize": 64, "dtype": "float16", "shape": [4]})"),
           std::string(R"({"quant_type": "nf4", "blocksize": 48, "dtype": "float16", "shape": [4]})"),
           std::string(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "int8", "shape": [4]})"),
           std::string(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": null})"),
           std::string(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float16"})"),
           std::string(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": [4], "nested_blocksize": 256})")}) {
    EXPECT_THROW(nf4_parse_quant_state(bad, "model.layers.0.mlp.up_proj.weight"), InputError) << bad;
  }
  try {
    nf4_parse_quant_state(R"({"quant_type": "fp4", "blocksize": 64, "dtype": "float16", "shape": [4]})", "up.weight");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("up.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp4"), std::string::npos) << e.what();
  }
}

TEST(Nf4, RejectsBadArguments) {
  float x[64] = {};
  uint8_t packed[32];
  float absmax[2];
  for (int64_t blocksize : {0, 16, 48, 8192, -64}) {
    EXPECT_FALSE(nf4_valid_blocksize(blocksize));
    EXPECT_THROW(nf4_quantize(x, Nf4ValueType::f32, 64, blocksize, packed, absmax), InternalError) << blocksize;
    EXPECT_THROW(nf4_dequantize(packed, absmax, 64, blocksize, x, Nf4ValueType::f32), InternalError) << blocksize;
  }
  EXPECT_THROW(nf4_quantize(x, Nf4ValueType::f32, -1, 64, packed, absmax), InternalError);
  EXPECT_THROW(nf4_quantize(nullptr, Nf4ValueType::f32, 64, 64, packed, absmax), InternalError);
  EXPECT_THROW(nf4_dequantize(packed, nullptr, 64, 64, x, Nf4ValueType::f32), InternalError);
  EXPECT_THROW(nf4_absmax_offset(absmax, 0), InternalError);
  try {
    nf4_quantize(x, Nf4ValueType::f32, 64, 48, packed, absmax);
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("blocksize 48"), std::string::npos) << e.what();
  }
  // n == 0 is a no-op, even with null buffers.
  EXPECT_NO_THROW(nf4_quantize(nullptr, Nf4ValueType::f32, 0, 64, nullptr, nullptr));
  EXPECT_NO_THROW(nf4_dequantize(nullptr, nullptr, 0, 64, nullptr, Nf4ValueType::bf16));
}

}  // namespace
}  // namespace ferry::kernels
