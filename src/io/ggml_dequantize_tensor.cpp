// ggml blocks -> torch tensor (see ggml_dequantize_tensor.h).
#include "src/io/ggml_dequantize_tensor.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "kernels/cpu/half_convert.h"
#include "src/io/ggml_dequantize.h"

namespace ferry::io {
namespace {

// Rows smaller than this many elements are grouped into one task (a task costs microseconds).
constexpr int64_t kElementsPerTask = 1 << 16;
// A 16-bit output is dequantised into a float buffer of this many elements (16 KB, cache-sized),
// then rounded into place; a multiple of every block size (1, 32, 256).
constexpr int64_t kChunkElements = 4096;
static_assert(kChunkElements % 256 == 0);

// float -> bfloat16 as torch's `.to(torch.bfloat16)` on x86 CPUs: round to nearest-even, and every
// NaN becomes 0xffff, as ATen's vectorised conversion (AVX2/AVX-512, which .to() runs even for a few
// elements) writes it. c10::BFloat16's scalar constructor (kernels::float_to_bf16) writes 0x7fc0.
inline uint16_t float_to_bf16_as_torch(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffff;
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <class Round>
void dequantize_rows_16bit(GgmlType type, const uint8_t* data, int64_t row_length, int64_t row_bytes,
                           const GgmlTypeTraits& traits, int64_t begin, int64_t end, uint16_t* out,
                           Round round) {
  const int64_t chunk_blocks = kChunkElements / traits.block_elements;
  float buffer[kChunkElements];
  for (int64_t row = begin; row < end; ++row) {
    const uint8_t* blocks = data + row * row_bytes;
    uint16_t* row_out = out + row * row_length;
    for (int64_t first = 0; first < row_length; first += chunk_blocks * traits.block_elements) {
      const int64_t count = std::min(chunk_blocks * traits.block_elements, row_length - first);
      dequantize_row(type, blocks + first / traits.block_elements * traits.block_bytes, count, buffer);
      for (int64_t i = 0; i < count; ++i) row_out[first + i] = round(buffer[i]);
    }
  }
}

}  // namespace

at::Tensor dequantize_tensor(GgmlType type, const uint8_t* data, at::IntArrayRef shape, at::ScalarType dtype) {
  FERRY_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              "dequantize_tensor: output dtype must be float32, bfloat16 or float16, got ", c10::toString(dtype));
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const int64_t row_length = shape.empty() ? 1 : shape.back();
  FERRY_CHECK(row_length >= 0 && row_length % traits.block_elements == 0, "dequantize_tensor: a ", traits.name,
              " row must be a whole number of ", traits.block_elements, "-element blocks, but the row (last "
              "dimension) has ", row_length, " elements");
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(dtype));
  const int64_t numel = out.numel();
  if (numel == 0) return out;
  FERRY_CHECK(data != nullptr);
  const int64_t rows = numel / row_length;
  const int64_t row_bytes = row_length / traits.block_elements * traits.block_bytes;
  const int64_t grain = std::max<int64_t>(1, kElementsPerTask / row_length);
  if (dtype == at::kFloat) {
    float* o = out.data_ptr<float>();
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        dequantize_row(type, data + row * row_bytes, row_length, o + row * row_length);
      }
    });
  } else {
    auto* o = static_cast<uint16_t*>(out.data_ptr());
    const bool bf16 = dtype == at::kBFloat16;
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      if (bf16) {
        dequantize_rows_16bit(type, data, row_length, row_bytes, traits, begin, end, o, float_to_bf16_as_torch);
      } else {
        dequantize_rows_16bit(type, data, row_length, row_bytes, traits, begin, end, o, kernels::float_to_fp16);
      }
    });
  }
  return out;
}

}  // namespace ferry::io
