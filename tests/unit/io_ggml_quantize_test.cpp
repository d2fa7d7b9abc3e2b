// to_ggml (src/io/ggml_quantize.h) for the block types, through Ferry's own dequantiser
// (ggml_dequantize.h, equal to gguf-py's): the bytes have the type's size, rows are quantised on
// their own (a row's bytes do not depend on the other rows), bf16 input quantises as its float32
// widening, and the round trip stays within each type's error on Gaussian weights (relative RMS
// error; measured values beside the bounds).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <iostream>

#include "core/error.h"
#include "src/io/ggml_dequantize.h"
#include "src/io/ggml_quantize.h"

namespace ferry::io {
namespace {

struct Case {
  GgmlType type;
  double max_relative_rms;  // bound on rms(x - dequantised) / rms(x) for N(0, 1) weights
};

// Measured on the 64 x 1024 Gaussian matrix below: Q4_0 0.0858, Q5_0 0.0427, Q5_1 0.0378,
// Q8_0 0.0054, Q4_K 0.0713, Q5_K 0.0362, Q6_K 0.0177; the bounds are 15-20% above.
const Case kCases[] = {{GgmlType::q4_0, 0.10}, {GgmlType::q5_0, 0.05}, {GgmlType::q5_1, 0.045},
                       {GgmlType::q8_0, 0.0065}, {GgmlType::q4_k, 0.085}, {GgmlType::q5_k, 0.043},
                       {GgmlType::q6_k, 0.021}};

TEST(GgmlQuantizeTensor, RoundTripErrorPerType) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({64, 1024}, at::kFloat);
  const double rms = x.pow(2).mean().sqrt().item<double>();
  for (const Case& c : kCases) {
    const at::Tensor q = to_ggml(x, c.type);
    ASSERT_EQ(q.scalar_type(), at::kByte);
    ASSERT_EQ(static_cast<uint64_t>(q.numel()), ggml_nbytes(c.type, x.numel())) << ggml_type_name(c.type);
    at::Tensor back = at::empty_like(x);
    dequantize_row(c.type, q.data_ptr<uint8_t>(), x.numel(), back.data_ptr<float>());
    const double error = (back - x).pow(2).mean().sqrt().item<double>() / rms;
    std::cout << ggml_type_name(c.type) << ": relative RMS error " << error << "\n";
    EXPECT_LE(error, c.max_relative_rms) << ggml_type_name(c.type);
    EXPECT_GT(error, c.max_relative_rms / 4) << ggml_type_name(c.type) << ": suspiciously exact";
  }
}

TEST(GgmlQuantizeTensor, RowsAreIndependentAndBf16IsItsFloat32) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({6, 512}, at::kFloat);
  for (const GgmlType type : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q5_0}) {
    const at::Tensor all = to_ggml(x, type);
    const at::Tensor row = to_ggml(x.slice(0, 3, 4), type);
    const int64_t row_bytes = row.numel();
    EXPECT_EQ(std::memcmp(all.data_ptr<uint8_t>() + 3 * row_bytes, row.data_ptr<uint8_t>(), size_t(row_bytes)), 0)
        << ggml_type_name(type);
    const at::Tensor bf16 = x.to(at::kBFloat16);
    EXPECT_TRUE(at::equal(to_ggml(bf16, type), to_ggml(bf16.to(at::kFloat), type))) << ggml_type_name(type);
  }
}

TEST(GgmlQuantizeTensor, RefusesRowsThatAreNotWholeBlocksAndReadOnlyTypes) {
  EXPECT_THROW(to_ggml(at::zeros({4, 320}), GgmlType::q4_k), InternalError);
  EXPECT_THROW(to_ggml(at::zeros({4, 48}), GgmlType::q4_0), InternalError);
  EXPECT_THROW(to_ggml(at::zeros({4, 256}), GgmlType::q3_k), InternalError);
  EXPECT_TRUE(ggml_type_writable(GgmlType::q5_1));
  EXPECT_FALSE(ggml_type_writable(GgmlType::q2_k));
}

}  // namespace
}  // namespace ferry::io
