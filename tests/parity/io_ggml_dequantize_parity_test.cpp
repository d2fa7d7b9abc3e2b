// ggml dequantisation (src/io/ggml_dequantize.h, ggml_dequantize_tensor.h) against gguf-py's
// gguf.quants.dequantize, bit for bit (memcmp of the float32s), for every type Ferry reads: blocks
// gguf-py quantised from awkward floats (outliers, zeros, negatives, tiny values), random blocks with
// finite fp16 scales, an all-zero block, and every F16/BF16 bit pattern; row by row, as one long
// run of blocks, and through dequantize_tensor, whose bf16/fp16 outputs must equal torch's
// `.to(bfloat16 / float16)` of gguf-py's float32 (in Python and here).
// Fixtures: tests/parity/io_ggml_dequantize_ref.py.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "src/io/ggml_dequantize.h"
#include "src/io/ggml_dequantize_tensor.h"
#include "src/io/ggml_types.h"
#include "tests/parity/tensor_fixture.h"

namespace ferry {
namespace {

const io::GgmlTypeTraits* type_named(const std::string& name) {
  for (uint32_t v = 0; v < 64; ++v) {
    const io::GgmlTypeTraits* traits = io::find_ggml_type(v);
    if (traits != nullptr && name == traits->name) return traits;
  }
  return nullptr;
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.numel() == b.numel() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

// Index and values of the first float that differs, for a readable failure.
std::string first_difference(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(got + i, want + i, sizeof(float)) != 0) {
      uint32_t g, w;
      std::memcpy(&g, got + i, 4);
      std::memcpy(&w, want + i, 4);
      char text[160];
      std::snprintf(text, sizeof(text), "element %lld: got %.9g (0x%08x), gguf-py %.9g (0x%08x)",
                    static_cast<long long>(i), got[i], g, want[i], w);
      return text;
    }
  }
  return "none";
}

TEST(GgmlDequantizeParity, EveryTypeEqualsGgufPyBitForBit) {
  ferry_test::TensorFixture fx("io_ggml_dequantize");
  std::set<std::string> types_seen;
  int cases = 0;
  for (const auto& [key, blocks] : fx.in) {
    if (key.rfind("blocks.", 0) != 0) continue;
    const std::string id = key.substr(7);  // "<TYPE>.<case>"
    const std::string type_name = id.substr(0, id.find('.'));
    const io::GgmlTypeTraits* traits = type_named(type_name);
    ASSERT_NE(traits, nullptr) << "fixture type " << type_name << " is not in ggml_types.h";
    const torch::Tensor want = fx.want("f32." + id);
    ASSERT_EQ(want.scalar_type(), torch::kFloat);
    const int64_t rows = want.size(0), cols = want.size(1);
    ASSERT_EQ(blocks.size(0), rows);
    ASSERT_EQ(static_cast<uint64_t>(blocks.size(1)), io::ggml_nbytes(traits->type, cols)) << id;
    const auto* data = blocks.data_ptr<uint8_t>();
    const auto* expected = want.data_ptr<float>();

    std::vector<float> got(static_cast<size_t>(rows * cols), -1.0f);
    for (int64_t r = 0; r < rows; ++r) {
      io::dequantize_row(traits->type, data + r * blocks.size(1), cols, got.data() + r * cols);
    }
    EXPECT_EQ(std::memcmp(got.data(), expected, got.size() * sizeof(float)), 0)
        << id << " row by row, first difference at " << first_difference(got.data(), expected, rows * cols);

    std::vector<float> whole(got.size(), -1.0f);
    io::dequantize_row(traits->type, data, rows * cols, whole.data());
    EXPECT_EQ(std::memcmp(whole.data(), expected, whole.size() * sizeof(float)), 0)
        << id << " as one run, first difference at " << first_difference(whole.data(), expected, rows * cols);

    const torch::Tensor f32 = io::dequantize_tensor(traits->type, data, {rows, cols}, torch::kFloat);
    EXPECT_TRUE(same_bits(f32, want)) << id << " dequantize_tensor float32";
    const torch::Tensor f32_3d = io::dequantize_tensor(traits->type, data, {rows, 1, cols}, torch::kFloat);
    EXPECT_EQ(f32_3d.sizes(), torch::IntArrayRef({rows, 1, cols}));
    EXPECT_TRUE(same_bits(f32_3d, want)) << id << " dequantize_tensor float32, 3-d shape";

    for (const auto& [name, dtype] : {std::pair{"bf16", torch::kBFloat16}, std::pair{"f16", torch::kHalf}}) {
      const torch::Tensor out = io::dequantize_tensor(traits->type, data, {rows, cols}, dtype);
      EXPECT_EQ(out.scalar_type(), dtype);
      EXPECT_TRUE(same_bits(out, fx.want(std::string(name) + "." + id)))
          << id << " dequantize_tensor " << name << " != Python torch's .to() of gguf-py's float32";
      EXPECT_TRUE(same_bits(out, want.to(dtype)))
          << id << " dequantize_tensor " << name << " != libtorch's .to() of gguf-py's float32";
    }
    types_seen.insert(type_name);
    ++cases;
  }
  // Every type of the table has fixtures (the reference writes at least random and zero blocks).
  for (uint32_t v = 0; v < 64; ++v) {
    if (const io::GgmlTypeTraits* traits = io::find_ggml_type(v)) {
      EXPECT_TRUE(types_seen.count(traits->name)) << "no fixture for " << traits->name;
    }
  }
  EXPECT_GE(cases, 36);
}

}  // namespace
}  // namespace ferry
