// NF4 quantise / dequantise: the scalar definitions, the threaded entry points and the double
// quantisation of the absmax. See nf4.h for the format and where each operation comes from.
#include "kernels/cpu/nf4.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/nf4_code_book.h"
#include "kernels/cpu/nf4_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::kernels {
namespace {

// bnb get_4bit_type("nf4"), as fp32.
constexpr float kNf4Code[16] = {FERRY_NF4_CODE_BOOK};

// bnb create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), as fp32 (sorted).
constexpr float kDynamicCode[256] = {
    -0x1.fc6666p-1f, -0x1.f53334p-1f, -0x1.eep-1f, -0x1.e6ccccp-1f, -0x1.df999ap-1f, -0x1.d86666p-1f,
    -0x1.d13334p-1f, -0x1.cap-1f, -0x1.c2ccccp-1f, -0x1.bb999ap-1f, -0x1.b46666p-1f, -0x1.ad3334p-1f,
    -0x1.a6p-1f, -0x1.9eccccp-1f, -0x1.97999ap-1f, -0x1.906666p-1f, -0x1.893334p-1f, -0x1.82p-1f,
    -0x1.7accccp-1f, -0x1.73999ap-1f, -0x1.6c6668p-1f, -0x1.653334p-1f, -0x1.5ep-1f, -0x1.56ccccp-1f,
    -0x1.4f999ap-1f, -0x1.486668p-1f, -0x1.413334p-1f, -0x1.3ap-1f, -0x1.32ccccp-1f, -0x1.2b999ap-1f,
    -0x1.246668p-1f, -0x1.1d3334p-1f, -0x1.16p-1f, -0x1.0eccccp-1f, -0x1.079998p-1f, -0x1.006666p-1f,
    -0x1.f26664p-2f, -0x1.e4p-2f, -0x1.d59998p-2f, -0x1.c73334p-2f, -0x1.b8ccccp-2f, -0x1.aa6666p-2f,
    -0x1.9cp-2f, -0x1.8d9998p-2f, -0x1.7f3334p-2f, -0x1.70ccccp-2f, -0x1.626666p-2f, -0x1.54p-2f,
    -0x1.459998p-2f, -0x1.373334p-2f, -0x1.28ccccp-2f, -0x1.1a6668p-2f, -0x1.0cp-2f, -0x1.fb3332p-3f,
    -0x1.de6666p-3f, -0x1.c1999ap-3f, -0x1.a4ccccp-3f, -0x1.88p-3f, -0x1.6b3334p-3f, -0x1.4e6666p-3f,
    -0x1.31999ap-3f, -0x1.14ccccp-3f, -0x1.fp-4f, -0x1.b66668p-4f, -0x1.93d70ap-4f, -0x1.8851eep-4f,
    -0x1.7ccccep-4f, -0x1.7147aep-4f, -0x1.65c29p-4f, -0x1.5a3d7p-4f, -0x1.4eb854p-4f, -0x1.433334p-4f,
    -0x1.37ae14p-4f, -0x1.2c28f6p-4f, -0x1.20a3d6p-4f, -0x1.151ebap-4f, -0x1.09999ap-4f, -0x1.fc28f6p-5f,
    -0x1.e51ebap-5f, -0x1.ce147ap-5f, -0x1.b70a3ep-5f, -0x1.ap-5f, -0x1.88f5c2p-5f, -0x1.71eb86p-5f,
    -0x1.5ae146p-5f, -0x1.43d70ap-5f, -0x1.2ccccep-5f, -0x1.15c29p-5f, -0x1.fd70a4p-6f, -0x1.cf5c2ap-6f,
    -0x1.a147aep-6f, -0x1.733334p-6f, -0x1.451ebap-6f, -0x1.170a3ep-6f, -0x1.d1eb86p-7f, -0x1.75c29p-7f,
    -0x1.3e76c8p-7f, -0x1.2c083p-7f, -0x1.19999ap-7f, -0x1.072b02p-7f, -0x1.e978d4p-8f, -0x1.c49ba6p-8f,
    -0x1.9fbe76p-8f, -0x1.7ae148p-8f, -0x1.56041ap-8f, -0x1.3126e8p-8f, -0x1.0c49bap-8f, -0x1.ced914p-9f,
    -0x1.851eb8p-9f, -0x1.3b645ap-9f, -0x1.e353f8p-10f, -0x1.4fdf3ap-10f, -0x1.eecbfep-11f, -0x1.b3d07cp-11f,
    -0x1.78d5p-11f, -0x1.3dd982p-11f, -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f, -0x1.040bfep-17f, -0x1.b43528p-19f,
    -0x1.27476ep-21f, 0.0f, 0x1.27476ep-21f, 0x1.b43528p-19f, 0x1.040bfep-17f, 0x1.64840cp-16f,
    0x1.6f0068p-15f, 0x1.15df66p-14f, 0x1.743e96p-14f, 0x1.47ae16p-13f, 0x1.19ce0ap-12f, 0x1.8fc506p-12f,
    0x1.02de02p-11f, 0x1.3dd982p-11f, 0x1.78d5p-11f, 0x1.b3d07cp-11f, 0x1.eecbfep-11f, 0x1.4fdf3ap-10f,
    0x1.e353f8p-10f, 0x1.3b645ap-9f, 0x1.851eb8p-9f, 0x1.ced914p-9f, 0x1.0c49bap-8f, 0x1.3126e8p-8f,
    0x1.56041ap-8f, 0x1.7ae148p-8f, 0x1.9fbe76p-8f, 0x1.c49ba6p-8f, 0x1.e978d4p-8f, 0x1.072b02p-7f,
    0x1.19999ap-7f, 0x1.2c083p-7f, 0x1.3e76c8p-7f, 0x1.75c29p-7f, 0x1.d1eb86p-7f, 0x1.170a3ep-6f,
    0x1.451ebap-6f, 0x1.733334p-6f, 0x1.a147aep-6f, 0x1.cf5c2ap-6f, 0x1.fd70a4p-6f, 0x1.15c29p-5f,
    0x1.2ccccep-5f, 0x1.43d70ap-5f, 0x1.5ae146p-5f, 0x1.71eb86p-5f, 0x1.88f5c2p-5f, 0x1.ap-5f,
    0x1.b70a3ep-5f, 0x1.ce147ap-5f, 0x1.e51ebap-5f, 0x1.fc28f6p-5f, 0x1.09999ap-4f, 0x1.151ebap-4f,
    0x1.20a3d6p-4f, 0x1.2c28f6p-4f, 0x1.37ae14p-4f, 0x1.433334p-4f, 0x1.4eb854p-4f, 0x1.5a3d7p-4f,
    0x1.65c29p-4f, 0x1.7147aep-4f, 0x1.7ccccep-4f, 0x1.8851eep-4f, 0x1.93d70ap-4f, 0x1.b66668p-4f,
    0x1.fp-4f, 0x1.14ccccp-3f, 0x1.31999ap-3f, 0x1.4e6666p-3f, 0x1.6b3334p-3f, 0x1.88p-3f,
    0x1.a4ccccp-3f, 0x1.c1999ap-3f, 0x1.de6666p-3f, 0x1.fb3332p-3f, 0x1.0cp-2f, 0x1.1a6668p-2f,
    0x1.28ccccp-2f, 0x1.373334p-2f, 0x1.459998p-2f, 0x1.54p-2f, 0x1.626666p-2f, 0x1.70ccccp-2f,
    0x1.7f3334p-2f, 0x1.8d9998p-2f, 0x1.9cp-2f, 0x1.aa6666p-2f, 0x1.b8ccccp-2f, 0x1.c73334p-2f,
    0x1.d59998p-2f, 0x1.e4p-2f, 0x1.f26664p-2f, 0x1.006666p-1f, 0x1.079998p-1f, 0x1.0eccccp-1f,
    0x1.16p-1f, 0x1.1d3334p-1f, 0x1.246668p-1f, 0x1.2b999ap-1f, 0x1.32ccccp-1f, 0x1.3ap-1f,
    0x1.413334p-1f, 0x1.486668p-1f, 0x1.4f999ap-1f, 0x1.56ccccp-1f, 0x1.5ep-1f, 0x1.653334p-1f,
    0x1.6c6668p-1f, 0x1.73999ap-1f, 0x1.7accccp-1f, 0x1.82p-1f, 0x1.893334p-1f, 0x1.906666p-1f,
    0x1.97999ap-1f, 0x1.9eccccp-1f, 0x1.a6p-1f, 0x1.ad3334p-1f, 0x1.b46666p-1f, 0x1.bb999ap-1f,
    0x1.c2ccccp-1f, 0x1.cap-1f, 0x1.d13334p-1f, 0x1.d86666p-1f, 0x1.df999ap-1f, 0x1.e6ccccp-1f,
    0x1.eep-1f, 0x1.f53334p-1f, 0x1.fc6666p-1f, 0x1p+0f,
};

// torch.bucketize's boundaries: midpoints of consecutive codes, (c[j] + c[j+1]) / 2 in fp32.
struct Nf4Midpoints {
  float mid[15];
  Nf4Midpoints() {
    for (int j = 0; j < 15; ++j) mid[j] = (kNf4Code[j] + kNf4Code[j + 1]) / 2.0f;
  }
};
const Nf4Midpoints kMidpoints;

// Hides a value from the optimizer so a product that feeds an add stays its own rounding (no FMA
// contraction where the target has FMA), as bnb's unfused torch ops round it.
inline float rounded(float x) {
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(x));
#endif
  return x;
}

struct LoadF32 {
  const float* p;
  float operator()(int64_t i) const { return p[i]; }
};
struct LoadBF16 {
  const uint16_t* p;
  float operator()(int64_t i) const { return bf16_to_float(p[i]); }
};
struct LoadF16 {
  const uint16_t* p;
  float operator()(int64_t i) const { return fp16_to_float(p[i]); }
};

// torch.bucketize(s, midpoints) for s in [-1, 1]: the number of midpoints strictly below s. NaN
// gives 15: the binary search moves right on every comparison with a NaN.
inline uint8_t nf4_code_of(float s) {
  if (std::isnan(s)) return 15;
  // A linear count (the compiler keeps it branch-free); a binary search measured 2.5x slower.
  int code = 0;
  for (int j = 0; j < 15; ++j) code += kMidpoints.mid[j] < s;
  return uint8_t(code);
}

// torch.clamp(s, -1, 1): NaN stays NaN.
inline float clamp_unit(float s) {
  if (std::isnan(s)) return s;
  return std::min(std::max(s, -1.0f), 1.0f);
}

// x.abs().max() as torch reduces it: NaN wins.
template <class Load>
float block_absmax(const Load& x, int64_t begin, int64_t end) {
  float am = 0.0f;
  bool nan = false;
  for (int64_t i = begin; i < end; ++i) {
    const float a = std::fabs(x(i));
    if (std::isnan(a)) nan = true;
    else if (a > am) am = a;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : am;
}

// bnb's `absmax.clamp(min=1e-38)` (NaN passes through).
constexpr float kMinScale = 1e-38f;
inline float clamp_scale(float am) { return am < kMinScale ? kMinScale : am; }

// Blocks [block_begin, block_end) of x[0, n): the definition, per block.
template <class Load>
void quantize_blocks(const Load& x, int64_t n, int64_t blocksize, int64_t block_begin,
                     int64_t block_end, uint8_t* packed, float* absmax) {
  for (int64_t b = block_begin; b < block_end; ++b) {
    const int64_t begin = b * blocksize;
    const int64_t end = std::min(n, begin + blocksize);
    const float am = block_absmax(x, begin, end);
    const bool full = end - begin == blocksize;
    // A full block multiplies by the rounded reciprocal; bnb's partial last block divides.
    const float scale = full ? am : clamp_scale(am);
    const float inverse = 1.0f / clamp_scale(am);
    absmax[b] = scale;
    auto code = [&](int64_t i) {
      const float s = full ? x(i) * inverse : x(i) / scale;
      return nf4_code_of(clamp_unit(s));
    };
    // blocksize is even, so every block starts on a byte boundary.
    for (int64_t i = begin; i < end; i += 2) {
      const uint8_t high = code(i);
      const uint8_t low = i + 1 < end ? code(i + 1) : uint8_t(7);
      packed[i / 2] = uint8_t(high << 4 | low);
    }
  }
}

struct StoreF32 {
  float* p;
  void operator()(int64_t i, float v) const { p[i] = v; }
};
struct StoreBF16 {
  uint16_t* p;
  void operator()(int64_t i, float v) const { p[i] = float_to_bf16(v); }
};
struct StoreF16 {
  uint16_t* p;
  void operator()(int64_t i, float v) const { p[i] = float_to_fp16(v); }
};

// The definition: out[i] = code[nibble(i)] * absmax[i / blocksize] in fp32, then stored.
template <class Store>
void dequantize_blocks(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                       int64_t block_begin, int64_t block_end, const Store& out) {
  for (int64_t b = block_begin; b < block_end; ++b) {
    const int64_t begin = b * blocksize;
    const int64_t end = std::min(n, begin + blocksize);
    const float scale = absmax[b];
    for (int64_t i = begin; i < end; ++i) {
      const uint8_t byte = packed[i / 2];
      const int code = (i & 1) ? byte & 0xf : byte >> 4;
      out(i, kNf4Code[code] * scale);
    }
  }
}

void check_blocks(const char* what, int64_t n, int64_t blocksize) {
  FERRY_CHECK(n >= 0, what, ": n = ", n);
  FERRY_CHECK(nf4_valid_blocksize(blocksize), what, ": blocksize ", blocksize,
              " (bitsandbytes accepts 32, 64, ..., 4096)");
}

// Threads split the work into ranges of whole blocks, at least this many elements each.
constexpr int64_t kGrainElements = 16384;
// Below this a second thread costs more (a wake-up) than it saves.
constexpr int64_t kMinParallel = 4 * kGrainElements;

template <class Fn>
void for_block_ranges(int64_t n, int64_t blocksize, ThreadPool* pool, Fn&& fn) {
  const int64_t blocks = nf4_blocks(n, blocksize);
  if (n < kMinParallel) {
    fn(0, blocks);
    return;
  }
  if (!pool) pool = &default_thread_pool();
  pool->parallel_for(blocks, std::max<int64_t>(1, kGrainElements / blocksize), fn);
}

// ATen's CeilLog2 (aten/src/ATen/native/cpu/utils.h): 1 for x <= 2.
int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  return 64 - std::countl_zero(uint64_t(x - 1));
}

// ATen's row_sum over `size` elements of `lanes` floats each (SumKernel.cpp: multi_row_sum with 4
// interleaved rows and 4 levels of partial sums, then the rows added in order), lane by lane.
void aten_row_sum(const float* x, int64_t lanes, int64_t size, float* result) {
  constexpr int kLevels = 4, kRows = 4;
  const int64_t size_ilp = size / kRows;
  const int64_t level_power = std::max<int64_t>(4, ceil_log2(size_ilp) / kLevels);
  const int64_t level_step = int64_t(1) << level_power;
  const int64_t level_mask = level_step - 1;
  std::vector<float> acc(size_t(kLevels * kRows * lanes), 0.0f);
  auto at = [&](int level, int row) { return acc.data() + (level * kRows + row) * lanes; };
  auto add = [&](float* into, const float* from) {
    for (int64_t l = 0; l < lanes; ++l) into[l] += from[l];
  };
  int64_t i = 0;
  while (i + level_step <= size_ilp) {
    for (int64_t j = 0; j < level_step; ++j, ++i) {
      for (int k = 0; k < kRows; ++k) add(at(0, k), x + (i * kRows + k) * lanes);
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kRows; ++k) {
        add(at(j, k), at(j - 1, k));
        std::fill_n(at(j - 1, k), lanes, 0.0f);
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size_ilp; ++i) {
    for (int k = 0; k < kRows; ++k) add(at(0, k), x + (i * kRows + k) * lanes);
  }
  for (int j = 1; j < kLevels; ++j) {
    for (int k = 0; k < kRows; ++k) add(at(0, k), at(j, k));
  }
  for (int64_t r = size_ilp * kRows; r < size; ++r) add(at(0, 0), x + r * lanes);
  for (int k = 1; k < kRows; ++k) add(at(0, 0), at(0, k));
  std::copy_n(at(0, 0), lanes, result);
}

// One call of ATen's sum loop over a contiguous range: vectorized_inner_sum when it holds a full
// vector (lanes summed as above, the tail added first, then the lanes in order), else the scalar
// row_sum. The result is accumulated into an output that starts at 0.
float aten_sum_range(const float* x, int64_t size, int64_t lanes) {
  float sum = 0.0f;
  if (lanes > 1 && size >= lanes) {
    const int64_t vectors = size / lanes;
    std::vector<float> partial(size_t(lanes), 0.0f);
    aten_row_sum(x, lanes, vectors, partial.data());
    for (int64_t k = vectors * lanes; k < size; ++k) sum += x[k];
    for (int64_t l = 0; l < lanes; ++l) sum += partial[size_t(l)];
  } else {
    aten_row_sum(x, 1, size, &sum);
  }
  return 0.0f + sum;
}

// The 8-bit blockwise quantiser of bnb's CPU library (quantize_cpu_impl<float>, used for the
// absmax): a 65536-entry table from a value in [-1, 1] to the nearest code, built from the code
// book's midpoints, indexed by fma((s + 1) * 0.5, 65535, 0.5) truncated.
std::vector<uint8_t> build_quantize_lut(const float* code) {
  float mid[255];
  for (int i = 0; i < 255; ++i) mid[i] = (code[i] + code[i + 1]) * 0.5f;
  std::vector<uint8_t> lut(65536);
  int index = 0;
  for (int i = 0; i < 65536; ++i) {
    const float value = (2.0f * float(i)) / 65535.0f - 1.0f;
    while (index < 255 && value > mid[index]) ++index;
    lut[size_t(i)] = uint8_t(index);
  }
  return lut;
}

const std::vector<uint8_t>& dynamic_code_lut() {
  static const std::vector<uint8_t> lut = build_quantize_lut(kDynamicCode);
  return lut;
}

inline uint8_t lut_code(const uint8_t* lut, float s) {
  // std::clamp as bnb calls it: NaN passes through, and then converts to index 0.
  const float clamped = s < -1.0f ? -1.0f : (1.0f < s ? 1.0f : s);
  const float t = rounded((clamped + 1.0f) * 0.5f);
  const float index = std::fma(t, 65535.0f, 0.5f);
  // cvttss2si: NaN and out-of-range give INT_MIN, whose low 16 bits are 0.
  const int32_t truncated = std::isnan(index) ? std::numeric_limits<int32_t>::min() : int32_t(index);
  return lut[uint16_t(truncated)];
}

}  // namespace

namespace nf4_detail {

void quantize_range_scalar(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize,
                           int64_t block_begin, int64_t block_end, uint8_t* packed, float* absmax) {
  switch (type) {
    case Nf4ValueType::f32:
      quantize_blocks(LoadF32{static_cast<const float*>(x)}, n, blocksize, block_begin, block_end, packed, absmax);
      break;
    case Nf4ValueType::bf16:
      quantize_blocks(LoadBF16{static_cast<const uint16_t*>(x)}, n, blocksize, block_begin, block_end, packed, absmax);
      break;
    case Nf4ValueType::f16:
      quantize_blocks(LoadF16{static_cast<const uint16_t*>(x)}, n, blocksize, block_begin, block_end, packed, absmax);
      break;
  }
}

void dequantize_range_scalar(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                             int64_t block_begin, int64_t block_end, void* out, Nf4ValueType type) {
  switch (type) {
    case Nf4ValueType::f32:
      dequantize_blocks(packed, absmax, n, blocksize, block_begin, block_end, StoreF32{static_cast<float*>(out)});
      break;
    case Nf4ValueType::bf16:
      dequantize_blocks(packed, absmax, n, blocksize, block_begin, block_end, StoreBF16{static_cast<uint16_t*>(out)});
      break;
    case Nf4ValueType::f16:
      dequantize_blocks(packed, absmax, n, blocksize, block_begin, block_end, StoreF16{static_cast<uint16_t*>(out)});
      break;
  }
}

const float* nf4_midpoints() { return kMidpoints.mid; }

}  // namespace nf4_detail

const float* nf4_code() { return kNf4Code; }
const float* nf4_dynamic_code() { return kDynamicCode; }

namespace {
// AVX2 for the avx2 and avx512 levels (no AVX-512 path: the AVX2 one is memory-bound already).
nf4_detail::DequantizeRange range_kernel_for(SimdLevel level) {
  return level >= SimdLevel::avx2 ? nf4_detail::dequantize_range_avx2 : nf4_detail::dequantize_range_scalar;
}
nf4_detail::QuantizeRange quantize_kernel_for(SimdLevel level) {
  return level >= SimdLevel::avx2 ? nf4_detail::quantize_range_avx2 : nf4_detail::quantize_range_scalar;
}
}  // namespace

bool nf4_valid_blocksize(int64_t blocksize) {
  return blocksize >= 32 && blocksize <= 4096 && std::has_single_bit(uint64_t(blocksize));
}

void nf4_quantize_reference(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize,
                            uint8_t* packed, float* absmax) {
  check_blocks("nf4_quantize", n, blocksize);
  if (n == 0) return;
  FERRY_CHECK(x && packed && absmax, "nf4_quantize: a null buffer");
  nf4_detail::quantize_range_scalar(x, type, n, blocksize, 0, nf4_blocks(n, blocksize), packed, absmax);
}

void nf4_quantize_at(SimdLevel level, const void* x, Nf4ValueType type, int64_t n, int64_t blocksize,
                     uint8_t* packed, float* absmax) {
  FERRY_CHECK(cpu_supports(level), "this CPU cannot run the ", simd_level_name(level), " path");
  check_blocks("nf4_quantize", n, blocksize);
  if (n == 0) return;
  FERRY_CHECK(x && packed && absmax, "nf4_quantize: a null buffer");
  quantize_kernel_for(level)(x, type, n, blocksize, 0, nf4_blocks(n, blocksize), packed, absmax);
}

void nf4_quantize(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, uint8_t* packed,
                  float* absmax, ThreadPool* pool) {
  check_blocks("nf4_quantize", n, blocksize);
  if (n == 0) return;
  FERRY_CHECK(x && packed && absmax, "nf4_quantize: a null buffer");
  const nf4_detail::QuantizeRange kernel = quantize_kernel_for(best_simd_level());
  for_block_ranges(n, blocksize, pool, [&](int64_t begin, int64_t end) {
    kernel(x, type, n, blocksize, begin, end, packed, absmax);
  });
}

void nf4_dequantize_reference(const uint8_t* packed, const float* absmax, int64_t n,
                              int64_t blocksize, void* out, Nf4ValueType out_type) {
  check_blocks("nf4_dequantize", n, blocksize);
  if (n == 0) return;
  FERRY_CHECK(packed && absmax && out, "nf4_dequantize: a null buffer");
  nf4_detail::dequantize_range_scalar(packed, absmax, n, blocksize, 0, nf4_blocks(n, blocksize), out, out_type);
}

void nf4_dequantize_at(SimdLevel level, const uint8_t* packed, const float* absmax, int64_t n,
                       int64_t blocksize, void* out, Nf4ValueType out_type) {
  FERRY_CHECK(cpu_supports(level), "this CPU cannot run the ", simd_level_name(level), " path");
  check_blocks("nf4_dequantize", n, blocksize);
  if (n == 0) return;
  FERRY_CHECK(packed && absmax && out, "nf4_dequantize: a null buffer");
  range_kernel_for(level)(packed, absmax, n, blocksize, 0, nf4_blocks(n, blocksize), out, out_type);
}

void nf4_dequantize(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                    void* out, Nf4ValueType out_type, ThreadPool* pool) {
  check_blocks("nf4_dequantize", n, blocksize);
  if (n == 0) return;
  FERRY_CHECK(packed && absmax && out, "nf4_dequantize: a null buffer");
  const nf4_detail::DequantizeRange kernel = range_kernel_for(best_simd_level());
  for_block_ranges(n, blocksize, pool, [&](int64_t begin, int64_t end) {
    kernel(packed, absmax, n, blocksize, begin, end, out, out_type);
  });
}

float nf4_absmax_offset(const float* absmax, int64_t blocks, TorchSumOrder order) {
  FERRY_CHECK(blocks > 0 && absmax, "nf4_absmax_offset: ", blocks, " blocks");
  FERRY_CHECK(order.lanes >= 1 && order.threads >= 1, "nf4_absmax_offset: lanes ", order.lanes,
              ", threads ", order.threads);
  // ATen's parallel_reduce: below its GRAIN_SIZE (32768) or on one thread, one loop call; else
  // at::parallel_for's split into min(threads, ceil(n / 32768)) equal chunks, each summed into its
  // thread's slot of a zeroed buffer of `threads` values, which is then summed the same way.
  constexpr int64_t kAtenGrain = 32768;
  float sum;
  if (blocks < kAtenGrain || order.threads == 1) {
    sum = aten_sum_range(absmax, blocks, order.lanes);
  } else {
    const int64_t chunks = std::min<int64_t>(order.threads, (blocks + kAtenGrain - 1) / kAtenGrain);
    const int64_t chunk = (blocks + chunks - 1) / chunks;
    std::vector<float> partial(size_t(order.threads), 0.0f);
    for (int64_t t = 0; t < chunks && t * chunk < blocks; ++t) {
      const int64_t begin = t * chunk;
      partial[size_t(t)] = aten_sum_range(absmax + begin, std::min(blocks, begin + chunk) - begin, order.lanes);
    }
    sum = aten_sum_range(partial.data(), order.threads, order.lanes);
  }
  return sum / float(blocks);
}

void nf4_nest_absmax(const float* absmax, int64_t blocks, float offset, uint8_t* qabsmax,
                     float* absmax2, int64_t nested_blocksize, const float* code) {
  FERRY_CHECK(blocks >= 0 && nested_blocksize > 0, "nf4_nest_absmax: ", blocks, " blocks of ",
              nested_blocksize);
  if (blocks == 0) return;
  FERRY_CHECK(absmax && qabsmax && absmax2, "nf4_nest_absmax: a null buffer");
  std::vector<uint8_t> own_lut;
  const uint8_t* lut = dynamic_code_lut().data();
  if (code && code != kDynamicCode) {
    own_lut = build_quantize_lut(code);
    lut = own_lut.data();
  }
  std::vector<float> centred(size_t(std::min(blocks, nested_blocksize)));
  for (int64_t b = 0; b * nested_blocksize < blocks; ++b) {
    const int64_t begin = b * nested_blocksize;
    const int64_t end = std::min(blocks, begin + nested_blocksize);
    // torch's `absmax - offset` first, then bnb's std::max over |value| (which skips NaN),
    // floored at 0.
    float am = -std::numeric_limits<float>::infinity();
    for (int64_t i = begin; i < end; ++i) {
      const float v = absmax[i] - offset;
      centred[size_t(i - begin)] = v;
      if (std::fabs(v) > am) am = std::fabs(v);
    }
    am = std::max(0.0f, am);
    absmax2[b] = am;
    if (am == 0.0f) {
      std::fill(qabsmax + begin, qabsmax + end, uint8_t(0));
      continue;
    }
    const float inverse = 1.0f / am;
    for (int64_t i = begin; i < end; ++i) qabsmax[i] = lut_code(lut, centred[size_t(i - begin)] * inverse);
  }
}

void nf4_unnest_absmax(const uint8_t* qabsmax, const float* absmax2, float offset, int64_t blocks,
                       float* absmax, int64_t nested_blocksize, const float* code) {
  FERRY_CHECK(blocks >= 0 && nested_blocksize > 0, "nf4_unnest_absmax: ", blocks, " blocks of ",
              nested_blocksize);
  if (blocks == 0) return;
  FERRY_CHECK(qabsmax && absmax2 && absmax, "nf4_unnest_absmax: a null buffer");
  if (!code) code = kDynamicCode;
  for (int64_t i = 0; i < blocks; ++i) {
    absmax[i] = rounded(code[qabsmax[i]] * absmax2[i / nested_blocksize]) + offset;
  }
}

}  // namespace ferry::kernels
