// ggml dequantisation (src/io/ggml_dequantize.h, ggml_dequantize_tensor.h) on hand-made blocks:
// a Q4_0 and a Q8_0 block against the block formulas written out here, and the invariant error for a
// row that is not a whole number of blocks. The bit-for-bit comparison with gguf-py for every type is
// tests/parity/io_ggml_dequantize_parity_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/io/ggml_dequantize.h"
#include "src/io/ggml_dequantize_tensor.h"

namespace ferry {
namespace {

using io::GgmlType;

TEST(GgmlDequantize, Q4_0BlockIsScaleTimesNibbleMinusEight) {
  // d = 0.375 as IEEE half: sign 0, exponent 13 (2^-2), mantissa 0x200 (1.5) -> 0x3600.
  std::array<uint8_t, 18> block{};
  block[0] = 0x00;
  block[1] = 0x36;
  for (int j = 0; j < 16; ++j) block[2 + j] = uint8_t((j * 7 + 3) % 16 | (((15 - j) % 16) << 4));
  std::vector<float> out(32);
  io::dequantize_row(GgmlType::q4_0, block.data(), 32, out.data());
  for (int j = 0; j < 16; ++j) {
    // Element j is the low nibble of byte j, element j + 16 its high nibble; x = d * (q - 8).
    const int low = (j * 7 + 3) % 16, high = (15 - j) % 16;
    EXPECT_EQ(out[j], 0.375f * float(low - 8)) << "element " << j;
    EXPECT_EQ(out[j + 16], 0.375f * float(high - 8)) << "element " << j + 16;
  }
  EXPECT_EQ(out[0], 0.375f * -5);  // byte 0 = 0xf3: low nibble 3, high 15
  EXPECT_EQ(out[16], 0.375f * 7);
}

TEST(GgmlDequantize, Q8_0BlockIsScaleTimesSignedByte) {
  // d = -0.0999755859375 (the half nearest -0.1: 0xae66), q = -128, -100, ..., 127.
  std::array<uint8_t, 34> block{};
  block[0] = 0x66;
  block[1] = 0xae;
  const std::array<int, 32> q = {-128, -100, -64, -33, -17, -8, -2, -1, 0,  1,  2,  3,   5,   8,   13,  21,
                                 34,   55,   89,  127, 126, 100, 64, 32, 16, 4, -4, -16, -32, -64, -99, 0};
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q[j]));
  std::vector<float> out(32);
  io::dequantize_row(GgmlType::q8_0, block.data(), 32, out.data());
  const float d = -0.0999755859375f;
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], float(q[j]) * d) << "element " << j;
  EXPECT_EQ(out[0], 12.796875f);  // -128 * d, exact
}

TEST(GgmlDequantize, RowThatIsNotWholeBlocksIsAnInternalError) {
  std::vector<uint8_t> data(4 * 18);
  try {
    io::dequantize_tensor(GgmlType::q4_0, data.data(), {2, 48}, torch::kFloat);
    FAIL() << "no error for rows of 48 Q4_0 elements";
  } catch (const InternalError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Q4_0"), std::string::npos) << message;
    EXPECT_NE(message.find("48"), std::string::npos) << message;
    EXPECT_NE(message.find("32-element blocks"), std::string::npos) << message;
  }
  std::vector<float> out(48);
  EXPECT_THROW(io::dequantize_row(GgmlType::q4_0, data.data(), 48, out.data()), InternalError);
  EXPECT_THROW(io::dequantize_tensor(GgmlType::q6_k, data.data(), {128}, torch::kBFloat16), InternalError);
}

TEST(GgmlDequantize, EmptyTensorAndDtypes) {
  const torch::Tensor empty = io::dequantize_tensor(GgmlType::q8_0, nullptr, {0, 64}, torch::kBFloat16);
  EXPECT_EQ(empty.sizes(), torch::IntArrayRef({0, 64}));
  EXPECT_EQ(empty.scalar_type(), torch::kBFloat16);
  std::vector<uint8_t> data(34);
  EXPECT_THROW(io::dequantize_tensor(GgmlType::q8_0, data.data(), {32}, torch::kDouble), InternalError);
}

}  // namespace
}  // namespace ferry
