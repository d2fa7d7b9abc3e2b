// NF4 kernels (kernels/cpu/nf4.h) against bitsandbytes 0.50.2 on the CPU, bit for bit: packed
// codes, absmax, the double-quantised absmax (offset, qabsmax, absmax2) and dequantize_4bit's output,
// for 162 tensors (fp32/bf16/fp16; normal, uniform, with outliers and edge values; sizes not
// divisible by 64; blocksizes 32 to 4096), and two checkpoints bnb saved (bnb.nn.Linear4bit state
// dicts, nested and plain) read back through nf4_state.h. Fixtures: tests/parity/kernels_nf4_ref.py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cpu/nf4.h"
#include "kernels/cpu/nf4_state.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/parity/tensor_fixture.h"

namespace ferry {
namespace {

using kernels::Nf4ValueType;

const std::filesystem::path kFolder = std::filesystem::path(FERRY_FIXTURES_DIR) / "kernels_nf4";

nlohmann::json read_cases() {
  std::ifstream in(kFolder / "cases.json");
  if (!in) return {};
  return nlohmann::json::parse(in);
}

Nf4ValueType value_type(const std::string& name) {
  return name == "f32" ? Nf4ValueType::f32 : name == "bf16" ? Nf4ValueType::bf16 : Nf4ValueType::f16;
}

torch::ScalarType scalar_type(Nf4ValueType type) {
  return type == Nf4ValueType::f32 ? torch::kFloat : type == Nf4ValueType::bf16 ? torch::kBFloat16 : torch::kHalf;
}

// Bitwise equality of two tensors' bytes (NaN == NaN of the same bits, +0 != -0).
::testing::AssertionResult same_bits(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  const auto a = got.contiguous().reshape({-1});
  const auto b = want.contiguous().reshape({-1});
  if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel()) {
    return ::testing::AssertionFailure() << what << ": " << a.scalar_type() << "[" << a.numel() << "] vs "
                                         << b.scalar_type() << "[" << b.numel() << "]";
  }
  const size_t bytes = size_t(a.numel()) * a.element_size();
  if (std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0) return ::testing::AssertionSuccess();
  const auto* pa = static_cast<const uint8_t*>(a.data_ptr());
  const auto* pb = static_cast<const uint8_t*>(b.data_ptr());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * a.element_size(), pb + i * a.element_size(), size_t(a.element_size())) != 0) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  return ::testing::AssertionFailure() << what << ": " << mismatches << " of " << a.numel()
                                       << " elements differ, first at " << first << ": " << a[first].item()
                                       << " vs " << b[first].item();
}

TEST(Nf4Parity, CodeBooksEqualBitsandbytes) {
  ferry_test::TensorFixture fx("kernels_nf4");
  if (fx.expected.empty()) return;
  EXPECT_TRUE(same_bits(torch::from_blob(const_cast<float*>(kernels::nf4_code()), {16}), fx.want("nf4_code"), "nf4 code"));
  EXPECT_TRUE(same_bits(torch::from_blob(const_cast<float*>(kernels::nf4_dynamic_code()), {256}),
                        fx.want("dynamic_code"), "dynamic code"));
}

TEST(Nf4Parity, QuantiseNestAndDequantiseEqualBitsandbytes) {
  ferry_test::TensorFixture fx("kernels_nf4");
  const nlohmann::json meta = read_cases();
  if (fx.expected.empty() || meta.empty()) return;
  const kernels::TorchSumOrder order{meta.at("torch_lanes").get<int>(), meta.at("torch_threads").get<int>()};
  kernels::ThreadPool pool(3);
  int checked = 0, nested = 0;
  for (const auto& c : meta.at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const Nf4ValueType type = value_type(c.at("dtype"));
    const int64_t blocksize = c.at("blocksize");
    const torch::Tensor x = fx[name + ".x"].contiguous();
    ASSERT_EQ(x.scalar_type(), scalar_type(type));
    const int64_t n = x.numel();
    const int64_t blocks = kernels::nf4_blocks(n, blocksize);

    auto packed = torch::empty({kernels::nf4_packed_bytes(n)}, torch::kByte);
    auto absmax = torch::empty({blocks}, torch::kFloat);
    kernels::nf4_quantize_reference(x.data_ptr(), type, n, blocksize, packed.data_ptr<uint8_t>(), absmax.data_ptr<float>());
    EXPECT_TRUE(same_bits(packed, fx.want(name + ".packed"), "packed (reference)"));
    EXPECT_TRUE(same_bits(absmax, fx.want(name + ".absmax"), "absmax (reference)"));
    auto packed_mt = torch::empty_like(packed);
    auto absmax_mt = torch::empty_like(absmax);
    kernels::nf4_quantize(x.data_ptr(), type, n, blocksize, packed_mt.data_ptr<uint8_t>(), absmax_mt.data_ptr<float>(), &pool);
    EXPECT_TRUE(same_bits(packed_mt, fx.want(name + ".packed"), "packed (threaded)"));
    EXPECT_TRUE(same_bits(absmax_mt, fx.want(name + ".absmax"), "absmax (threaded)"));

    torch::Tensor scales = absmax;
    if (c.at("nested").get<bool>()) {
      const float offset = kernels::nf4_absmax_offset(absmax.data_ptr<float>(), blocks, order);
      EXPECT_TRUE(same_bits(torch::full({1}, offset), fx.want(name + ".offset"), "offset"));
      if (name == "bf16.scaled.2049x1024.bs64.nested" && meta.at("offset_depends_on_threads").get<bool>()) {
        // The fixture was drawn so that torch's one-thread sum differs: the split matters.
        const float single = kernels::nf4_absmax_offset(absmax.data_ptr<float>(), blocks, {order.lanes, 1});
        EXPECT_FALSE(same_bits(torch::full({1}, single), fx.want(name + ".offset"), "one-thread offset"));
      }
      auto qabsmax = torch::empty({blocks}, torch::kByte);
      auto absmax2 = torch::empty({kernels::nf4_blocks(blocks, kernels::kNf4NestedBlocksize)}, torch::kFloat);
      kernels::nf4_nest_absmax(absmax.data_ptr<float>(), blocks, offset, qabsmax.data_ptr<uint8_t>(), absmax2.data_ptr<float>());
      EXPECT_TRUE(same_bits(qabsmax, fx.want(name + ".qabsmax"), "qabsmax"));
      EXPECT_TRUE(same_bits(absmax2, fx.want(name + ".absmax2"), "absmax2"));
      // Dequantise from bnb's own nested state, so a mismatch above does not hide one here.
      scales = torch::empty({blocks}, torch::kFloat);
      const auto want_q = fx.want(name + ".qabsmax").contiguous();
      const auto want_a2 = fx.want(name + ".absmax2").contiguous();
      kernels::nf4_unnest_absmax(want_q.data_ptr<uint8_t>(), want_a2.data_ptr<float>(),
                                 fx.want(name + ".offset").item<float>(), blocks, scales.data_ptr<float>());
      ++nested;
    }
    const auto want_packed = fx.want(name + ".packed").contiguous();
    auto out = torch::empty({n}, scalar_type(type));
    kernels::nf4_dequantize_reference(want_packed.data_ptr<uint8_t>(), scales.data_ptr<float>(), n, blocksize,
                                      out.data_ptr(), type);
    EXPECT_TRUE(same_bits(out, fx.want(name + ".dequant"), "dequantised (reference)"));
    auto out_mt = torch::empty({n}, scalar_type(type));
    kernels::nf4_dequantize(want_packed.data_ptr<uint8_t>(), scales.data_ptr<float>(), n, blocksize,
                            out_mt.data_ptr(), type, &pool);
    EXPECT_TRUE(same_bits(out_mt, fx.want(name + ".dequant"), "dequantised (threaded)"));
    ++checked;
  }
  EXPECT_EQ(checked, 162);
  EXPECT_GT(nested, 60);
}

// A checkpoint bnb saved: parse the quant state, unnest, dequantise; equal to bnb's dequantize_4bit.
void check_checkpoint(const std::string& tag, bool nested) {
  ferry_test::TensorFixture fx("kernels_nf4");
  if (fx.expected.empty()) return;
  const auto tensors = io::load_safetensors(kFolder / ("ckpt_" + tag + ".safetensors"));
  const auto& state_bytes = tensors.at(std::string("weight.") + kernels::kNf4QuantStateKey).contiguous();
  const std::string json(static_cast<const char*>(state_bytes.data_ptr()), size_t(state_bytes.numel()));
  const kernels::Nf4QuantState state = kernels::nf4_parse_quant_state(json, "weight");
  EXPECT_EQ(state.shape, (std::vector<int64_t>{96, 200}));
  EXPECT_EQ(state.blocksize, 64);
  EXPECT_EQ(state.dtype, Nf4ValueType::bf16);
  ASSERT_EQ(state.nested, nested);
  // Ferry writes the same bytes bnb wrote.
  EXPECT_EQ(kernels::nf4_quant_state_json(state), json);

  const auto weight = tensors.at("weight").contiguous();
  ASSERT_EQ(weight.scalar_type(), torch::kByte);
  ASSERT_EQ(weight.numel(), state.packed_bytes());
  EXPECT_TRUE(same_bits(tensors.at("weight.quant_map"), fx.want("nf4_code"), "quant_map"));
  auto scales = torch::empty({state.blocks()}, torch::kFloat);
  if (nested) {
    const auto qabsmax = tensors.at("weight.absmax").contiguous();
    const auto absmax2 = tensors.at("weight.nested_absmax").contiguous();
    const auto code = tensors.at("weight.nested_quant_map").contiguous();
    ASSERT_EQ(qabsmax.scalar_type(), torch::kByte);
    ASSERT_EQ(absmax2.numel(), state.nested_blocks());
    EXPECT_TRUE(same_bits(code, fx.want("dynamic_code"), "nested_quant_map"));
    kernels::nf4_unnest_absmax(qabsmax.data_ptr<uint8_t>(), absmax2.data_ptr<float>(), state.nested_offset,
                               state.blocks(), scales.data_ptr<float>(), state.nested_blocksize, code.data_ptr<float>());
  } else {
    scales.copy_(tensors.at("weight.absmax"));
  }
  auto out = torch::empty({96, 200}, torch::kBFloat16);
  kernels::nf4_dequantize(weight.data_ptr<uint8_t>(), scales.data_ptr<float>(), state.numel(), state.blocksize,
                          out.data_ptr(), state.dtype);
  EXPECT_TRUE(same_bits(out, fx.want("ckpt_" + tag + ".dequant"), "checkpoint " + tag));
}

TEST(Nf4Parity, NestedCheckpointBitsandbytesSavedDequantisesEqual) { check_checkpoint("nested", true); }
TEST(Nf4Parity, PlainCheckpointBitsandbytesSavedDequantisesEqual) { check_checkpoint("plain", false); }

}  // namespace
}  // namespace ferry
