// The AVX-512 paths of the K-type quantisers (ggml_quantize.h), bitwise equal to the definitions in
// ggml_quantize_reference.cpp. The work of a K block is its sub-blocks' fits (make_qkx2_quants: 21
// or 16 trial scales over 32 values; make_qx_quants: 19 over 16), and sub-blocks are fitted
// independently, so sixteen of them run side by side, one per lane: lane k holds sub-block k's
// values (gathered, so vector i holds value i of every sub-block), and every sum runs over i in
// the C code's order within its lane. Each vector operation is the C code's scalar one (add, mul,
// div, sqrt, compares with the same NaN behaviour, nearest_int's integer trick), one rounding each
// (-ffp-contract=off keeps products unfused), so every lane computes the scalar result. The
// cheap per-block rest (6-bit scales, the final levels, packing) is the definition's code, the
// final levels vectorised over a sub-block's values.
//
// Q4_K / Q5_K: two super-blocks (16 sub-blocks of 32) per pass; an odd last super-block runs in
// lanes 0-7 with lanes 8-15 repeating it (their results are dropped). Q6_K: one super-block (16
// sub-blocks of 16) per pass.
#include "kernels/cpu/ggml_quantize_internal.h"

#if defined(__x86_64__)
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_ps is `__Y = __Y`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define FERRY_AVX512_QUANT __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace ferry::kernels::ggml_detail {
namespace {

// nearest_int in every lane.
FERRY_AVX512_QUANT inline __m512i nearest(__m512 x) {
  const __m512i bits = _mm512_castps_si512(_mm512_add_ps(x, _mm512_set1_ps(12582912.f)));
  return _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
}

FERRY_AVX512_QUANT inline __m512i clamp(__m512i l, int lo, int hi) {
  return _mm512_max_epi32(_mm512_set1_epi32(lo), _mm512_min_epi32(_mm512_set1_epi32(hi), l));
}

FERRY_AVX512_QUANT inline __m512 abs_ps(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

FERRY_AVX512_QUANT inline __m512 neg_ps(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(int32_t(0x80000000u))));
}

// make_qkx2_quants(32, kNmax, x, weights, L, &the_min, Laux, rmin, 0.1, nstep, false) for 16
// sub-blocks at once, with quantize_row_q4_K_ref's weights (sqrt(mean x^2) + |x|). xt[i]: value i
// of each lane's sub-block. Out: levels lt[i] (as int32), scales and the_min per lane.
template <int kNmax>
FERRY_AVX512_QUANT void fit_qkx2_lanes(const __m512* xt, __m512i* lt, __m512* scale_out, __m512* the_min_out) {
  constexpr bool q5 = kNmax == 31;
  constexpr float rmin = q5 ? -0.5f : -1.f;
  constexpr int nstep = q5 ? 15 : 20;
  constexpr float rdelta = 0.1f;
  const __m512 zero = _mm512_setzero_ps();

  __m512 sum_x2 = zero;
  for (int l = 0; l < 32; ++l) sum_x2 = _mm512_add_ps(sum_x2, _mm512_mul_ps(xt[l], xt[l]));
  const __m512 av_x = _mm512_sqrt_ps(_mm512_div_ps(sum_x2, _mm512_set1_ps(32.f)));
  __m512 w[32];
  for (int l = 0; l < 32; ++l) w[l] = _mm512_add_ps(av_x, abs_ps(xt[l]));

  __m512 min = xt[0];
  __m512 max = xt[0];
  __m512 sum_w = w[0];
  __m512 sum_x = _mm512_mul_ps(sum_w, xt[0]);
  for (int i = 1; i < 32; ++i) {
    min = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xt[i], min, _CMP_LT_OQ), min, xt[i]);
    max = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xt[i], max, _CMP_GT_OQ), max, xt[i]);
    sum_w = _mm512_add_ps(sum_w, w[i]);
    sum_x = _mm512_add_ps(sum_x, _mm512_mul_ps(w[i], xt[i]));
  }
  min = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(min, zero, _CMP_GT_OQ), min, zero);
  const __mmask16 flat = _mm512_cmp_ps_mask(max, min, _CMP_EQ_OQ);  // max == min: L = 0, scale 0
  const __m512 flat_min = min;

  const __m512 nmax = _mm512_set1_ps(float(kNmax));
  __m512 iscale = _mm512_div_ps(nmax, _mm512_sub_ps(max, min));
  __m512 scale = _mm512_div_ps(_mm512_set1_ps(1.f), iscale);
  __m512 best_error = zero;
  for (int i = 0; i < 32; ++i) {
    lt[i] = clamp(nearest(_mm512_mul_ps(iscale, _mm512_sub_ps(xt[i], min))), 0, kNmax);
    __m512 diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(scale, _mm512_cvtepi32_ps(lt[i])), min), xt[i]);
    diff = _mm512_mul_ps(diff, diff);
    best_error = _mm512_add_ps(best_error, _mm512_mul_ps(w[i], diff));
  }
  __m512i laux[32];
  __m512 lf[32];
  for (int is = 0; is <= nstep; ++is) {
    const float trial = rmin + rdelta * float(is) + float(kNmax);
    iscale = _mm512_div_ps(_mm512_set1_ps(trial), _mm512_sub_ps(max, min));
    __m512 sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < 32; ++i) {
      laux[i] = clamp(nearest(_mm512_mul_ps(iscale, _mm512_sub_ps(xt[i], min))), 0, kNmax);
      lf[i] = _mm512_cvtepi32_ps(laux[i]);
      const __m512 wl = _mm512_mul_ps(w[i], lf[i]);
      sum_l = _mm512_add_ps(sum_l, wl);
      sum_l2 = _mm512_add_ps(sum_l2, _mm512_mul_ps(wl, lf[i]));
      sum_xl = _mm512_add_ps(sum_xl, _mm512_mul_ps(wl, xt[i]));
    }
    const __m512 D = _mm512_sub_ps(_mm512_mul_ps(sum_w, sum_l2), _mm512_mul_ps(sum_l, sum_l));
    const __mmask16 d_positive = _mm512_cmp_ps_mask(D, zero, _CMP_GT_OQ);
    if (d_positive == 0) continue;
    __m512 this_scale = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_w, sum_xl), _mm512_mul_ps(sum_x, sum_l)), D);
    __m512 this_min = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_l2, sum_x), _mm512_mul_ps(sum_l, sum_xl)), D);
    const __mmask16 min_positive = _mm512_cmp_ps_mask(this_min, zero, _CMP_GT_OQ);
    this_min = _mm512_mask_blend_ps(min_positive, this_min, zero);
    this_scale = _mm512_mask_blend_ps(min_positive, this_scale, _mm512_div_ps(sum_xl, sum_l2));
    __m512 cur_error = zero;
    for (int i = 0; i < 32; ++i) {
      __m512 diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(this_scale, lf[i]), this_min), xt[i]);
      diff = _mm512_mul_ps(diff, diff);
      cur_error = _mm512_add_ps(cur_error, _mm512_mul_ps(w[i], diff));
    }
    const __mmask16 better = d_positive & _mm512_cmp_ps_mask(cur_error, best_error, _CMP_LT_OQ);
    if (better == 0) continue;
    for (int i = 0; i < 32; ++i) lt[i] = _mm512_mask_blend_epi32(better, lt[i], laux[i]);
    best_error = _mm512_mask_blend_ps(better, best_error, cur_error);
    scale = _mm512_mask_blend_ps(better, scale, this_scale);
    min = _mm512_mask_blend_ps(better, min, this_min);
  }
  if (flat != 0) {
    for (int i = 0; i < 32; ++i) lt[i] = _mm512_maskz_mov_epi32(__mmask16(~flat), lt[i]);
    scale = _mm512_mask_blend_ps(flat, scale, zero);
    min = _mm512_mask_blend_ps(flat, min, flat_min);
  }
  *scale_out = scale;
  *the_min_out = neg_ps(min);  // -min
}

// k_block_levels with each sub-block's 32 values as two vectors.
template <int kNmax>
FERRY_AVX512_QUANT void k_block_levels_avx512(const float* x, const uint8_t* y, uint8_t* L) {
  const float d_all = load_fp16(y);
  const float dmin_all = load_fp16(y + 2);
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, y + 4, &sc, &m);
    const float d = d_all * sc;
    if (d == 0.0f) continue;
    const __m512 dv = _mm512_set1_ps(d);
    const __m512 dm = _mm512_set1_ps(dmin_all * m);
    for (int h = 0; h < 2; ++h) {
      const __m512 v = _mm512_loadu_ps(x + 32 * j + 16 * h);
      const __m512i l = clamp(nearest(_mm512_div_ps(_mm512_add_ps(v, dm), dv)), 0, kNmax);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(L + 32 * j + 16 * h), _mm512_cvtepi32_epi8(l));
    }
  }
}

template <int kNmax>
FERRY_AVX512_QUANT void quantize_range_k_avx512(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  constexpr int64_t kBytes = kNmax == 31 ? 176 : 144;
  for (int64_t b = begin; b < end; b += 2) {
    const bool pair = b + 1 < end;
    const float* base = x + b * kQkK;
    // Lane k: sub-block k of the pair (lanes 8-15 repeat the block when it is alone).
    const __m512i lane_start = pair ? _mm512_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384,
                                                        416, 448, 480)
                                    : _mm512_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224, 0, 32, 64, 96, 128, 160,
                                                        192, 224);
    __m512 xt[32];
    for (int i = 0; i < 32; ++i) {
      xt[i] = _mm512_i32gather_ps(_mm512_add_epi32(lane_start, _mm512_set1_epi32(i)), base, 4);
    }
    __m512i lt[32];
    __m512 scale_v, min_v;
    fit_qkx2_lanes<kNmax>(xt, lt, &scale_v, &min_v);
    alignas(64) float scales[16];
    alignas(64) float mins[16];
    _mm512_store_ps(scales, scale_v);
    _mm512_store_ps(mins, min_v);
    alignas(64) uint8_t levels_t[32][16];  // [value][lane]
    for (int i = 0; i < 32; ++i) {
      _mm_store_si128(reinterpret_cast<__m128i*>(levels_t[i]), _mm512_cvtepi32_epi8(lt[i]));
    }
    for (int half = 0; half < (pair ? 2 : 1); ++half) {
      const float* xb = base + half * kQkK;
      uint8_t* y = out + (b + half) * kBytes;
      uint8_t L[kQkK];
      float max_scale = 0;
      float max_min = 0;
      for (int j = 0; j < 8; ++j) {
        const int lane = 8 * half + j;
        for (int i = 0; i < 32; ++i) L[32 * j + i] = levels_t[i][lane];
        if (scales[lane] > max_scale) max_scale = scales[lane];
        if (mins[lane] > max_min) max_min = mins[lane];
      }
      k_block_scales<kNmax>(scales + 8 * half, mins + 8 * half, max_scale, max_min, y);
      k_block_levels_avx512<kNmax>(xb, y, L);
      k_block_pack<kNmax>(L, y);
    }
  }
}

// make_qx_quants(16, 32, x, L, rmse_type 1, NULL) for the 16 sub-blocks of one Q6_K block.
FERRY_AVX512_QUANT void fit_qx_lanes(const __m512* xt, __m512i* lt, __m512* scale_out) {
  constexpr int nmax = 32;
  const __m512 zero = _mm512_setzero_ps();
  __m512 max = zero;
  __m512 amax = zero;
  for (int i = 0; i < 16; ++i) {
    const __m512 ax = abs_ps(xt[i]);
    const __mmask16 larger = _mm512_cmp_ps_mask(ax, amax, _CMP_GT_OQ);
    amax = _mm512_mask_blend_ps(larger, amax, ax);
    max = _mm512_mask_blend_ps(larger, max, xt[i]);
  }
  const __mmask16 tiny = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(kGroupMaxEps), _CMP_LT_OQ);  // all zero: L 0

  __m512 w[16];
  for (int i = 0; i < 16; ++i) w[i] = _mm512_mul_ps(xt[i], xt[i]);
  __m512 iscale = _mm512_div_ps(_mm512_set1_ps(float(-nmax)), max);
  __m512 sumlx = zero, suml2 = zero;
  for (int i = 0; i < 16; ++i) {
    const __m512i l = clamp(nearest(_mm512_mul_ps(iscale, xt[i])), -nmax, nmax - 1);
    lt[i] = _mm512_add_epi32(l, _mm512_set1_epi32(nmax));
    const __m512 lf = _mm512_cvtepi32_ps(l);
    sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(_mm512_mul_ps(w[i], xt[i]), lf));
    suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(w[i], lf), lf));
  }
  __m512 scale = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(suml2, zero, _CMP_NEQ_UQ), sumlx, suml2);
  __m512 best = _mm512_mul_ps(scale, sumlx);
  __m512i laux[16];
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float trial = float(nmax) + 0.1f * float(is);
    iscale = _mm512_div_ps(_mm512_set1_ps(-trial), max);
    sumlx = suml2 = zero;
    for (int i = 0; i < 16; ++i) {
      const __m512i l = clamp(nearest(_mm512_mul_ps(iscale, xt[i])), -nmax, nmax - 1);
      laux[i] = _mm512_add_epi32(l, _mm512_set1_epi32(nmax));
      const __m512 lf = _mm512_cvtepi32_ps(l);
      sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(_mm512_mul_ps(w[i], xt[i]), lf));
      suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(w[i], lf), lf));
    }
    const __mmask16 better =
        _mm512_cmp_ps_mask(suml2, zero, _CMP_GT_OQ) &
        _mm512_cmp_ps_mask(_mm512_mul_ps(sumlx, sumlx), _mm512_mul_ps(best, suml2), _CMP_GT_OQ);
    if (better == 0) continue;
    for (int i = 0; i < 16; ++i) lt[i] = _mm512_mask_blend_epi32(better, lt[i], laux[i]);
    scale = _mm512_mask_blend_ps(better, scale, _mm512_div_ps(sumlx, suml2));
    best = _mm512_mask_blend_ps(better, best, _mm512_mul_ps(scale, sumlx));
  }
  if (tiny != 0) {
    for (int i = 0; i < 16; ++i) lt[i] = _mm512_maskz_mov_epi32(__mmask16(~tiny), lt[i]);
    scale = _mm512_mask_blend_ps(tiny, scale, zero);
  }
  *scale_out = scale;
}

FERRY_AVX512_QUANT void q6_k_block_levels_avx512(const float* x, const uint8_t* y, int8_t* L) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(y + 192);
  const float d_all = load_fp16(y + 208);
  for (int j = 0; j < kQkK / 16; ++j) {
    const float d = d_all * sc[j];
    if (d == 0.0f) continue;
    const __m512 v = _mm512_loadu_ps(x + 16 * j);
    const __m512i l = clamp(nearest(_mm512_div_ps(v, _mm512_set1_ps(d))), -32, 31);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(L + 16 * j), _mm512_cvtepi32_epi8(_mm512_add_epi32(l, _mm512_set1_epi32(32))));
  }
}

FERRY_AVX512_QUANT void quantize_range_q6_k_lanes(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  const __m512i lane_start = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  for (int64_t b = begin; b < end; ++b) {
    const float* xb = x + b * kQkK;
    uint8_t* y = out + b * 210;
    __m512 xt[16];
    for (int i = 0; i < 16; ++i) xt[i] = _mm512_i32gather_ps(_mm512_add_epi32(lane_start, _mm512_set1_epi32(i)), xb, 4);
    __m512i lt[16];
    __m512 scale_v;
    fit_qx_lanes(xt, lt, &scale_v);
    alignas(64) float scales[16];
    _mm512_store_ps(scales, scale_v);
    alignas(64) int8_t levels_t[16][16];  // [value][lane]
    for (int i = 0; i < 16; ++i) _mm_store_si128(reinterpret_cast<__m128i*>(levels_t[i]), _mm512_cvtepi32_epi8(lt[i]));
    int8_t L[kQkK];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      for (int i = 0; i < 16; ++i) L[16 * ib + i] = levels_t[i][ib];
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (!q6_k_block_scales(scales, max_scale, max_abs_scale, y)) continue;
    q6_k_block_levels_avx512(xb, y, L);
    q6_k_block_pack(L, y);
  }
}

}  // namespace

void quantize_range_q4_k_avx512(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_k_avx512<15>(x, begin, end, out);
}
void quantize_range_q5_k_avx512(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_k_avx512<31>(x, begin, end, out);
}
void quantize_range_q6_k_avx512(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_q6_k_lanes(x, begin, end, out);
}

}  // namespace ferry::kernels::ggml_detail

#else  // not x86-64: the definitions (best_simd_level() never reports avx512 there)

namespace ferry::kernels::ggml_detail {
void quantize_range_q4_k_avx512(const float* x, int64_t b, int64_t e, uint8_t* out) { quantize_range_q4_k(x, b, e, out); }
void quantize_range_q5_k_avx512(const float* x, int64_t b, int64_t e, uint8_t* out) { quantize_range_q5_k(x, b, e, out); }
void quantize_range_q6_k_avx512(const float* x, int64_t b, int64_t e, uint8_t* out) { quantize_range_q6_k(x, b, e, out); }
}  // namespace ferry::kernels::ggml_detail

#endif
