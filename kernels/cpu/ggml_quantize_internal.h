// What ggml_quantize_reference.cpp (the definition), the SIMD paths (ggml_quantize_lanes.h) and
// ggml_quantize.cpp (dispatch, threads) share: ggml's scalar helpers, exactly as ggml-quants.c / ggml-impl.h write
// them, and the range kernels' signature.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/ggml_quantize.h"
#include "kernels/cpu/half_convert.h"

namespace ferry::kernels::ggml_detail {

inline constexpr int kQkK = 256;            // QK_K: values per K-quant super-block
inline constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS

// nearest_int: round to nearest, ties to even, through the float add of 1.5 * 2^23 (valid for
// |x| <= 4194303; outside that it gives what the C gives: the low mantissa bits).
inline int nearest_int(float x) {
  const float shifted = x + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// ggml_compute_fp32_to_fp16 (ggml-impl.h), the conversion ggml-base uses without F16C: round to
// nearest even, overflow to infinity, NaN -> 0x7e00 with the sign kept.
inline uint16_t fp32_to_fp16(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = std::bit_cast<uint32_t>(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
  const uint32_t mantissa_bits = bits & 0x00000fffu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return uint16_t((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

inline void store_fp16(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, sizeof(h));
}

// get_scale_min_k4: sub-block j's 6-bit scale and min from a Q4_K / Q5_K block's 12 scale bytes.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// The second half of quantize_row_q4_K_ref (kNmax 15) / quantize_row_q5_K_ref (kNmax 31), after
// every sub-block's fit (scales, mins, the largest of each), in three steps: the 6-bit scales and
// mins against the largest ones and the fp16 d, dmin (k_block_scales); each value's final level
// (k_block_levels: sub-blocks whose scale rounds to 0 keep their fit's levels, as in the C); the
// packing (k_block_pack). `L` holds the 256 levels, `y` the block (144 / 176 bytes).
template <int kNmax>
inline void k_block_scales(const float* scales, const float* mins, float max_scale, float max_min, uint8_t* y) {
  uint8_t* s = y + 4;  // after half d, half dmin
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
    uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      s[j - 4] |= uint8_t((ls >> 4) << 6);
      s[j - 0] |= uint8_t((lm >> 4) << 6);
    }
  }
  store_fp16(y, max_scale / 63.f);
  store_fp16(y + 2, max_min / 63.f);
}

inline float load_fp16(const uint8_t* p) { return fp16_to_float(uint16_t(p[0] | (p[1] << 8))); }  // half_convert.h

template <int kNmax>
inline void k_block_levels(const float* x, const uint8_t* y, uint8_t* L) {
  const float d_all = load_fp16(y);
  const float dmin_all = load_fp16(y + 2);
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, y + 4, &sc, &m);
    const float d = d_all * sc;
    if (d == 0.0f) continue;
    const float dm = dmin_all * m;
    for (int ii = 0; ii < 32; ++ii) {
      int l = nearest_int((x[32 * j + ii] + dm) / d);
      l = l < 0 ? 0 : l > kNmax ? kNmax : l;
      L[32 * j + ii] = uint8_t(l);
    }
  }
}

template <int kNmax>
inline void k_block_pack(const uint8_t* L, uint8_t* y) {
  if constexpr (kNmax == 15) {
    uint8_t* q = y + 16;
    for (int j = 0; j < kQkK; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
  } else {
    uint8_t* qh = y + 16;
    uint8_t* ql = y + 48;
    std::memset(qh, 0, kQkK / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < kQkK; n += 64) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
      m1 = uint8_t(m1 << 2);
      m2 = uint8_t(m2 << 2);
      ql += 32;
    }
  }
}

// The second half of quantize_row_q6_K_ref, after the 16 sub-blocks' fits (`scales`, levels in
// `L`), in the same three steps. `y`: 210 bytes (ql[128], qh[64], int8 scales[16], half d).
// q6_k_block_scales returns false for a block whose largest scale is below GROUP_MAX_EPS: the C
// writes it as all zeros, and that is all (y is written).
inline bool q6_k_block_scales(const float* scales, float max_scale, float max_abs_scale, uint8_t* y) {
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, 210);
    store_fp16(y + 208, 0.f);
    return false;
  }
  int8_t* sc = reinterpret_cast<int8_t*>(y + 192);
  const float iscale = -128.f / max_scale;
  store_fp16(y + 208, 1 / iscale);
  for (int ib = 0; ib < kQkK / 16; ++ib) {
    const int l = nearest_int(iscale * scales[ib]);
    sc[ib] = int8_t(l < 127 ? l : 127);
  }
  return true;
}

inline void q6_k_block_levels(const float* x, const uint8_t* y, int8_t* L) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(y + 192);
  const float d_all = load_fp16(y + 208);
  for (int j = 0; j < kQkK / 16; ++j) {
    const float d = d_all * sc[j];
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int(x[16 * j + ii] / d);
      l = l < -32 ? -32 : l > 31 ? 31 : l;
      L[16 * j + ii] = int8_t(l + 32);
    }
  }
}

inline void q6_k_block_pack(const int8_t* L, uint8_t* y) {
  uint8_t* ql = y;
  uint8_t* qh = y + 128;
  for (int j = 0; j < kQkK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l + 0] & 0xF;
      const uint8_t q2 = L[j + l + 32] & 0xF;
      const uint8_t q3 = L[j + l + 64] & 0xF;
      const uint8_t q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = uint8_t(q1 | (q3 << 4));
      ql[l + 32] = uint8_t(q2 | (q4 << 4));
      qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                      ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

// Quantises blocks [block_begin, block_end) of x into out (both indexed from the tensor's start).
using QuantizeRange = void (*)(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);

// The definitions (ggml_quantize_reference.cpp).
void quantize_range_q4_0(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q5_0(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q5_1(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q8_0(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q4_k(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q5_k(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q6_k(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);

// The SIMD paths (ggml_quantize_avx512.cpp, ggml_quantize_avx2.cpp: ggml_quantize_lanes.h at 16
// and 8 lanes), bitwise equal to the definitions.
void quantize_range_q4_k_avx512(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q5_k_avx512(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q6_k_avx512(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q4_k_avx2(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q5_k_avx2(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);
void quantize_range_q6_k_avx2(const float* x, int64_t block_begin, int64_t block_end, uint8_t* out);

}  // namespace ferry::kernels::ggml_detail
