// ggml block quantisers (kernels/cpu/ggml_quantize.h) against llama.cpp itself, bit for bit: for 15
// inputs (trained-weight-like, outliers, one-signed, zero and constant blocks, ties, tiny, subnormal,
// beyond-fp16, real SmolLM2 rows) and Q4_0, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, every path (the
// definition, each SIMD level this CPU has, the threaded entry point on 1-3 threads) writes the
// bytes of ggml_quantize_chunk in llama-cpp-python 0.3.36's libggml-base.so (what llama-quantize
// runs without an importance matrix); and the 32-value types equal gguf-py's quantize too, except
// where gguf-py itself differs from llama.cpp (a block of negative zeros: gguf-py's scale is +0,
// llama.cpp's -0). Fixtures: tests/parity/kernels_ggml_quantize_ref.py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/ggml_quantize.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/parity/tensor_fixture.h"

namespace ferry {
namespace {

using kernels::GgmlQuantType;

const std::filesystem::path kFolder = std::filesystem::path(FERRY_FIXTURES_DIR) / "kernels_ggml_quantize";

const std::map<std::string, GgmlQuantType> kTypes = {
    {"Q4_0", GgmlQuantType::q4_0}, {"Q5_0", GgmlQuantType::q5_0}, {"Q5_1", GgmlQuantType::q5_1},
    {"Q8_0", GgmlQuantType::q8_0}, {"Q4_K", GgmlQuantType::q4_k}, {"Q5_K", GgmlQuantType::q5_k},
    {"Q6_K", GgmlQuantType::q6_k},
};

nlohmann::json cases_file() {
  std::ifstream in(kFolder / "cases.json");
  if (!in) return nlohmann::json::object();
  return nlohmann::json::parse(in);
}

std::vector<std::string> case_names() {
  const nlohmann::json cases = cases_file();
  if (!cases.contains("cases")) return {};
  return cases.at("cases").get<std::vector<std::string>>();
}

// Blocks whose bytes differ, as "block i (of n): byte j got a want b" for the first, and a count.
::testing::AssertionResult same_blocks(const std::vector<uint8_t>& got, const torch::Tensor& want, int64_t block_bytes,
                                       const std::string& what) {
  const auto* w = want.data_ptr<uint8_t>();
  if (static_cast<int64_t>(got.size()) != want.numel()) {
    return ::testing::AssertionFailure() << what << ": " << got.size() << " bytes, llama.cpp " << want.numel();
  }
  if (std::memcmp(got.data(), w, got.size()) == 0) return ::testing::AssertionSuccess();
  int64_t blocks = 0, first = -1;
  for (size_t i = 0; i < got.size(); i += size_t(block_bytes)) {
    if (std::memcmp(got.data() + i, w + i, size_t(block_bytes)) != 0) {
      if (first < 0) first = int64_t(i);
      ++blocks;
    }
  }
  int64_t byte = first;
  while (got[size_t(byte)] == w[byte]) ++byte;
  return ::testing::AssertionFailure() << what << ": " << blocks << " of " << got.size() / size_t(block_bytes)
                                       << " blocks differ; first: block " << first / block_bytes << ", byte "
                                       << byte - first << ": " << int(got[size_t(byte)]) << ", want "
                                       << int(w[byte]);
}

class GgmlQuantizeParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cases_file().contains("skipped")) fixture_ = new ferry_test::TensorFixture("kernels_ggml_quantize");
  }
  void SetUp() override {
    if (cases_file().contains("skipped")) {
      GTEST_SKIP() << "[needs llama_cpp] " << cases_file().at("skipped").get<std::string>()
                   << " (scripts/deps.sh installs it)";
    }
  }
  static void TearDownTestSuite() {
    delete fixture_;
    fixture_ = nullptr;
  }
  static ferry_test::TensorFixture* fixture_;
};
ferry_test::TensorFixture* GgmlQuantizeParity::fixture_ = nullptr;

TEST_F(GgmlQuantizeParity, EveryPathWritesLlamaCppsBytes) {
  const std::vector<std::string> cases = case_names();
  ASSERT_GE(cases.size(), 14u) << "missing " << kFolder << "/cases.json: run `ctest -R parity_fixture` first";
  std::vector<kernels::SimdLevel> levels;
  for (auto level : {kernels::SimdLevel::scalar, kernels::SimdLevel::avx2, kernels::SimdLevel::avx512}) {
    if (kernels::cpu_supports(level)) levels.push_back(level);
  }
  kernels::ThreadPool one(1), two(2), three(3);
  int64_t compared = 0;
  for (const std::string& name : cases) {
    const torch::Tensor x = (*fixture_)[name].contiguous();
    const int64_t n = x.numel();
    const float* values = x.data_ptr<float>();
    for (const auto& [type_name, type] : kTypes) {
      const kernels::GgmlQuantBlock block = kernels::ggml_quant_block(type);
      const torch::Tensor want = fixture_->want("llamacpp." + type_name + "." + name);
      std::vector<uint8_t> got(size_t(n / block.elements * block.bytes));
      const std::string what = type_name + " of " + name;
      kernels::ggml_quantize_reference(type, values, n, got.data());
      EXPECT_TRUE(same_blocks(got, want, block.bytes, what + " (definition)"));
      for (const auto level : levels) {
        std::fill(got.begin(), got.end(), uint8_t{0xAB});
        kernels::ggml_quantize_at(level, type, values, n, got.data());
        EXPECT_TRUE(same_blocks(got, want, block.bytes, what + " (" + kernels::simd_level_name(level) + ")"));
      }
      for (kernels::ThreadPool* pool : {&one, &two, &three}) {
        std::fill(got.begin(), got.end(), uint8_t{0xAB});
        kernels::ggml_quantize(type, values, n, got.data(), pool);
        EXPECT_TRUE(same_blocks(got, want, block.bytes, what + " (" + std::to_string(pool->num_threads()) + " threads)"));
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int64_t>(cases.size() * kTypes.size()));
}

// gguf-py's numpy quantisers for the types it implements: the same bytes, except its scale's sign for
// a block of zeros that starts with -0.0 (numpy's argmax picks -0.0 as "max", so d = -0.0 / -8 = +0;
// llama.cpp's loop never replaces its initial max = 0.0f, so d = 0.0 / -8 = -0).
TEST_F(GgmlQuantizeParity, ThirtyTwoValueTypesEqualGgufPy) {
  const std::vector<std::string> cases = case_names();
  ASSERT_FALSE(cases.empty());
  int64_t sign_only = 0;
  for (const std::string& name : cases) {
    const torch::Tensor x = (*fixture_)[name].contiguous();
    const float* values = x.data_ptr<float>();
    for (const char* type_name : {"Q4_0", "Q5_0", "Q5_1", "Q8_0"}) {
      const GgmlQuantType type = kTypes.at(type_name);
      const kernels::GgmlQuantBlock block = kernels::ggml_quant_block(type);
      const torch::Tensor want = fixture_->want(std::string("ggufpy.") + type_name + "." + name);
      std::vector<uint8_t> got(size_t(x.numel() / block.elements * block.bytes));
      kernels::ggml_quantize(type, values, x.numel(), got.data());
      ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel());
      const auto* w = want.data_ptr<uint8_t>();
      for (int64_t b = 0; b < x.numel() / block.elements; ++b) {
        const uint8_t* g = got.data() + b * block.bytes;
        const uint8_t* e = w + b * block.bytes;
        if (std::memcmp(g, e, size_t(block.bytes)) == 0) continue;
        bool zeros = true;
        for (int64_t i = 0; i < block.elements; ++i) zeros = zeros && values[b * block.elements + i] == 0.0f;
        const bool sign_of_d = g[0] == e[0] && (g[1] ^ e[1]) == 0x80 &&
                               std::memcmp(g + 2, e + 2, size_t(block.bytes - 2)) == 0;
        EXPECT_TRUE(zeros && sign_of_d) << type_name << " of " << name << ": block " << b << " differs from gguf-py";
        ++sign_only;
      }
    }
  }
  EXPECT_LE(sign_only, 2);  // the one block of -0.0 in zeros_constants, in Q4_0 and Q5_0
}

}  // namespace
}  // namespace ferry
