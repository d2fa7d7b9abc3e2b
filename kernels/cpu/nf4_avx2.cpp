// NF4 AVX2 + F16C paths, bit-identical to the definitions in nf4.cpp.
// Quantise: per full block, max |x| with NaN tracked separately (max is exact in any order), the
// scalar reciprocal, then per 16 elements one multiply, 15 compares against the midpoints (the
// bucketize count), NaN -> 15, and a pack of (even << 4 | odd) bytes; the tensor's partial last block
// (which divides) goes through the definition.
// Dequantise: per block, the 16 possible outputs code[j] * absmax (the same
// IEEE products as the definition), rounded once to bf16 (integer arithmetic, as float_to_bf16) or
// fp16 (F16C, round to nearest-even, as float_to_fp16); then 32 elements (16 packed bytes) per step
// are table lookups: two in-register permutes for fp32, pshufb on byte tables for 16-bit outputs.
// The tensor's partial last block, if its length is not a multiple of 32, goes through the scalar
// definition. Compiled with a function-level target
// attribute, so the library runs on CPUs without AVX2 (never called there).
#include "kernels/cpu/nf4_internal.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx2_common.h"

#include <algorithm>
#include <limits>

namespace ferry::kernels::nf4_detail {
namespace {

// code[idx] * scale for 8 indices in 0..15, from the block's 16 products: each half of the table
// by a permute (low 3 bits of the index), bit 3 picks the half.
FERRY_AVX2 inline __m256 lookup(__m256i idx, __m256 low_products, __m256 high_products) {
  const __m256 low = _mm256_permutevar8x32_ps(low_products, idx);
  const __m256 high = _mm256_permutevar8x32_ps(high_products, idx);
  return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

// 8 fp32 values rounded to bf16 / fp16 (as float_to_bf16 / float_to_fp16).
template <Nf4ValueType kOut>
FERRY_AVX2 inline __m128i to_half(__m256 v) {
  if constexpr (kOut == Nf4ValueType::bf16) return avx2::to_bf16(v);
  else return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// 16 packed bytes -> the 32 codes in element order, as two vectors of 16 byte indices.
FERRY_AVX2 inline void unpack_codes(const uint8_t* bytes16, __m128i& first, __m128i& second) {
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16));
  const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
  const __m128i low = _mm_and_si128(bytes, nibble);
  first = _mm_unpacklo_epi8(high, low);
  second = _mm_unpackhi_epi8(high, low);
}

template <Nf4ValueType kOut>
FERRY_AVX2 void dequantize(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                           int64_t block_begin, int64_t block_end, void* out) {
  const float* code = nf4_code();
  const __m256 low_codes = _mm256_loadu_ps(code), high_codes = _mm256_loadu_ps(code + 8);
  // Gathers the low bytes of 8 16-bit values into the first half, the high bytes into the second.
  const __m128i split_bytes = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int64_t b = block_begin; b < block_end; ++b) {
    const int64_t begin = b * blocksize;
    const int64_t end = std::min(n, begin + blocksize);
    const int64_t vector_end = begin + (end - begin) / 32 * 32;
    // The block's 16 possible outputs, each the definition's product code[j] * absmax.
    const __m256 scale = _mm256_set1_ps(absmax[b]);
    const __m256 low_products = _mm256_mul_ps(low_codes, scale);
    const __m256 high_products = _mm256_mul_ps(high_codes, scale);
    if constexpr (kOut == Nf4ValueType::f32) {
      float* o = static_cast<float*>(out);
      for (int64_t i = begin; i < vector_end; i += 32) {
        __m128i first, second;
        unpack_codes(packed + i / 2, first, second);
        _mm256_storeu_ps(o + i, lookup(_mm256_cvtepu8_epi32(first), low_products, high_products));
        _mm256_storeu_ps(o + i + 8, lookup(_mm256_cvtepu8_epi32(_mm_srli_si128(first, 8)), low_products, high_products));
        _mm256_storeu_ps(o + i + 16, lookup(_mm256_cvtepu8_epi32(second), low_products, high_products));
        _mm256_storeu_ps(o + i + 24, lookup(_mm256_cvtepu8_epi32(_mm_srli_si128(second, 8)), low_products, high_products));
      }
    } else {
      // 16-bit outputs: a 16-entry table of low bytes and one of high bytes, looked up with pshufb.
      const __m128i a = _mm_shuffle_epi8(to_half<kOut>(low_products), split_bytes);
      const __m128i c = _mm_shuffle_epi8(to_half<kOut>(high_products), split_bytes);
      const __m128i low_bytes = _mm_unpacklo_epi64(a, c), high_bytes = _mm_unpackhi_epi64(a, c);
      auto* o = reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + begin);
      for (int64_t i = begin; i < vector_end; i += 32, o += 4) {
        __m128i first, second;
        unpack_codes(packed + i / 2, first, second);
        const __m128i lo1 = _mm_shuffle_epi8(low_bytes, first), hi1 = _mm_shuffle_epi8(high_bytes, first);
        const __m128i lo2 = _mm_shuffle_epi8(low_bytes, second), hi2 = _mm_shuffle_epi8(high_bytes, second);
        _mm_storeu_si128(o, _mm_unpacklo_epi8(lo1, hi1));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi8(lo1, hi1));
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi8(lo2, hi2));
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi8(lo2, hi2));
      }
    }
    if (vector_end < end) {
      // Only the tensor's last, partial block gets here: redo it whole by the definition.
      dequantize_range_scalar(packed, absmax, end, blocksize, b, b + 1, out, kOut);
    }
  }
}

// 8 values of x from element i, widened to fp32 exactly (as the scalar loads).
template <Nf4ValueType kIn>
FERRY_AVX2 inline __m256 load8(const void* x, int64_t i) {
  constexpr GradType kGrad = kIn == Nf4ValueType::f32 ? GradType::f32
                             : kIn == Nf4ValueType::bf16 ? GradType::bf16 : GradType::f16;
  return avx2::load_grad<kGrad>(x, i);
}

// torch.bucketize against the 15 midpoints for 8 scaled values: the number of midpoints strictly
// below s (clamping s to [-1, 1] first, as bnb does, changes no count: the midpoints lie inside),
// and 15 for NaN. As int32 lanes.
FERRY_AVX2 inline __m256i bucketize8(__m256 s, const __m256* midpoints) {
  __m256i count = _mm256_setzero_si256();
  for (int j = 0; j < 15; ++j) {
    count = _mm256_sub_epi32(count, _mm256_castps_si256(_mm256_cmp_ps(midpoints[j], s, _CMP_LT_OQ)));
  }
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(s, s, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(count, _mm256_set1_epi32(15), nan);
}

// 16 codes (two int32 vectors, elements in order) -> 8 packed bytes, the even element high.
FERRY_AVX2 inline void pack16(__m256i first, __m256i second, uint8_t* out) {
  const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(first, second), 0xd8);
  const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
  // Each 16-bit lane holds an (even, odd) pair: (even << 4) | odd in its low byte.
  const __m128i pairs = _mm_or_si128(_mm_slli_epi16(bytes, 4), _mm_srli_epi16(bytes, 8));
  const __m128i low_bytes = _mm_and_si128(pairs, _mm_set1_epi16(0x00ff));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(low_bytes, low_bytes));
}

template <Nf4ValueType kIn>
FERRY_AVX2 void quantize(const void* x, int64_t n, int64_t blocksize, int64_t block_begin, int64_t block_end,
                         uint8_t* packed, float* absmax) {
  __m256 midpoints[15];
  for (int j = 0; j < 15; ++j) midpoints[j] = _mm256_set1_ps(nf4_midpoints()[j]);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = block_begin; b < block_end; ++b) {
    const int64_t begin = b * blocksize;
    if (begin + blocksize > n) {
      // The tensor's partial last block divides by its absmax: the definition does it.
      quantize_range_scalar(x, kIn, n, blocksize, b, b + 1, packed, absmax);
      continue;
    }
    // max |x| (exact in any order), NaN if any value is NaN (torch's max).
    __m256 max = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int64_t i = begin; i < begin + blocksize; i += 8) {
      const __m256 v = load8<kIn>(x, i);
      max = _mm256_max_ps(max, _mm256_andnot_ps(sign, v));
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, max);
    float am = 0.0f;
    for (float lane : lanes) am = std::max(am, lane);
    if (_mm256_movemask_ps(nan)) am = std::numeric_limits<float>::quiet_NaN();
    absmax[b] = am;
    const __m256 inverse = _mm256_set1_ps(1.0f / (am < 1e-38f ? 1e-38f : am));
    for (int64_t i = begin; i < begin + blocksize; i += 16) {
      const __m256i first = bucketize8(_mm256_mul_ps(load8<kIn>(x, i), inverse), midpoints);
      const __m256i second = bucketize8(_mm256_mul_ps(load8<kIn>(x, i + 8), inverse), midpoints);
      pack16(first, second, packed + i / 2);
    }
  }
}

}  // namespace

void dequantize_range_avx2(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                           int64_t block_begin, int64_t block_end, void* out, Nf4ValueType out_type) {
  switch (out_type) {
    case Nf4ValueType::f32: dequantize<Nf4ValueType::f32>(packed, absmax, n, blocksize, block_begin, block_end, out); break;
    case Nf4ValueType::bf16: dequantize<Nf4ValueType::bf16>(packed, absmax, n, blocksize, block_begin, block_end, out); break;
    case Nf4ValueType::f16: dequantize<Nf4ValueType::f16>(packed, absmax, n, blocksize, block_begin, block_end, out); break;
  }
}

void quantize_range_avx2(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, int64_t block_begin,
                         int64_t block_end, uint8_t* packed, float* absmax) {
  switch (type) {
    case Nf4ValueType::f32: quantize<Nf4ValueType::f32>(x, n, blocksize, block_begin, block_end, packed, absmax); break;
    case Nf4ValueType::bf16: quantize<Nf4ValueType::bf16>(x, n, blocksize, block_begin, block_end, packed, absmax); break;
    case Nf4ValueType::f16: quantize<Nf4ValueType::f16>(x, n, blocksize, block_begin, block_end, packed, absmax); break;
  }
}

}  // namespace ferry::kernels::nf4_detail

#else

namespace ferry::kernels::nf4_detail {
void dequantize_range_avx2(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                           int64_t block_begin, int64_t block_end, void* out, Nf4ValueType out_type) {
  dequantize_range_scalar(packed, absmax, n, blocksize, block_begin, block_end, out, out_type);
}
void quantize_range_avx2(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, int64_t block_begin,
                         int64_t block_end, uint8_t* packed, float* absmax) {
  quantize_range_scalar(x, type, n, blocksize, block_begin, block_end, packed, absmax);
}
}  // namespace ferry::kernels::nf4_detail

#endif
