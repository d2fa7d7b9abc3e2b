// Row-wise int8 (kernels/cpu/int8_rowwise.h, kernels/ops/int8.h) against bitsandbytes 0.50.2 on the
// CPU, bit for bit: the codes and row absmax of int8_vectorwise_quant, and the weight bnb's CPU
// training matmul dequantises, for 18 weights (fp32/bf16/fp16; odd and even sizes; outlier rows, a
// zero row, one column), through both the tensor-level op and the scalar reference.
// Fixtures: tests/parity/kernels_int8_ref.py.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/file_util.h"
#include "kernels/cpu/int8_rowwise.h"
#include "kernels/ops/int8.h"
#include "tests/parity/tensor_fixture.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using kernels::Nf4ValueType;

Nf4ValueType value_type(torch::ScalarType t) {
  return t == torch::kFloat ? Nf4ValueType::f32 : t == torch::kBFloat16 ? Nf4ValueType::bf16 : Nf4ValueType::f16;
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         torch::equal(a.contiguous().view(torch::kByte), b.contiguous().view(torch::kByte));
}

TEST(Int8Parity, QuantiseAndDequantiseEqualBitsandbytes) {
  const fs::path folder = fs::path(FERRY_FIXTURES_DIR) / "kernels_int8";
  if (fs::exists(folder / "SKIPPED")) GTEST_SKIP() << read_file(folder / "SKIPPED");
  ferry_test::TensorFixture fx("kernels_int8");
  int cases = 0;
  for (int i = 0; fx.in.count("w." + std::to_string(i)); ++i, ++cases) {
    const std::string id = std::to_string(i);
    const torch::Tensor w = fx["w." + id];
    const torch::Tensor cb = fx.want("cb." + id), scb = fx.want("scb." + id);
    const kernels::Int8Tensor q = kernels::int8_quantize_tensor(w);
    EXPECT_TRUE(same_bits(q.cb, cb)) << "codes of case " << id << " " << w.sizes() << " " << w.scalar_type();
    EXPECT_TRUE(same_bits(q.scb, scb)) << "scales of case " << id;
    EXPECT_EQ(q.dtype, w.scalar_type());

    torch::Tensor ref_cb = torch::empty_like(cb), ref_scb = torch::empty_like(scb);
    const torch::Tensor wc = w.contiguous();
    kernels::int8_rowwise_quantize_reference(wc.data_ptr(), value_type(w.scalar_type()), w.size(0), w.size(1),
                                             ref_cb.data_ptr<int8_t>(), ref_scb.data_ptr<float>());
    EXPECT_TRUE(same_bits(ref_cb, cb)) << "reference codes of case " << id;
    EXPECT_TRUE(same_bits(ref_scb, scb)) << "reference scales of case " << id;

    for (const auto& [name, dtype] : {std::pair{"f32", torch::kFloat}, std::pair{"bf16", torch::kBFloat16}}) {
      const torch::Tensor want = fx.want("dequant." + id + "." + name);
      EXPECT_TRUE(same_bits(kernels::int8_dequantize_tensor(q, dtype), want)) << "dequantised " << name << " " << id;
      torch::Tensor ref = torch::empty(w.sizes(), dtype);
      kernels::int8_rowwise_dequantize_reference(cb.data_ptr<int8_t>(), scb.data_ptr<float>(), w.size(0), w.size(1),
                                                 ref.data_ptr(), value_type(dtype));
      EXPECT_TRUE(same_bits(ref, want)) << "reference dequantised " << name << " " << id;
    }
  }
  EXPECT_EQ(cases, 18);
}

}  // namespace
}  // namespace ferry
