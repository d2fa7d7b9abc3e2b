// The K-type quantisers with sub-blocks side by side in SIMD lanes, written once for any vector
// width; included by ggml_quantize_avx512.cpp (16 lanes) and ggml_quantize_avx2.cpp (8 lanes), each
// after defining FERRY_LANES_TARGET (its target attribute) and a struct `Lanes` of vector operations:
//
//   kWidth; F (floats), I (int32s), M (a lane mask)
//   set1(float), set1i(int), add/sub/mul/div(F, F), sqrt, abs, neg (flips the sign bit)
//   lt/gt/eq (ordered: false on NaN, as the C's < > ==), ne_unordered (true on NaN, as `if (x)`),
//   both(M, M), none(M), blend(M, a, b) (b where M), blendi(M, I, I), zero_where(M, I)
//   nearest(F) (nearest_int), clamp(I, lo, hi), to_float(I), addi(I, I)
//   gather(base, offsets) (lane k: base[offsets[k]]), load(const float*), store_bytes(uint8_t*, I)
//   (the low byte of each lane)
//
// Each lane holds one sub-block and does that sub-block's arithmetic of the C code (ggml-quants.c's
// make_qkx2_quants for Q4_K / Q5_K, make_qx_quants for Q6_K), value by value in the C's order, one
// rounding per operation (the including files are compiled with -ffp-contract=off), so each lane's
// result is the scalar definition's (ggml_quantize_reference.cpp), bit for bit. The cheap rest of a
// block (6-bit or int8 scales, packing) is the definition's own code from ggml_quantize_internal.h;
// the final levels are vectorised over a sub-block's values.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/ggml_quantize_internal.h"

namespace ferry::kernels::ggml_detail {
namespace {

using F = Lanes::F;
using I = Lanes::I;
using M = Lanes::M;
constexpr int kWidth = Lanes::kWidth;

// make_qkx2_quants(32, kNmax, x, weights, L, &the_min, Laux, rmin, 0.1, nstep, false) in every
// lane, with quantize_row_q4_K_ref's weights (sqrt(mean x^2) + |x|). xt[i]: value i of each lane's
// sub-block. Out: levels lt[i] and, per lane, the scale and the_min.
template <int kNmax>
FERRY_LANES_TARGET void fit_qkx2_lanes(const F* xt, I* lt, F* scale_out, F* the_min_out) {
  constexpr bool q5 = kNmax == 31;
  constexpr float rmin = q5 ? -0.5f : -1.f;
  constexpr int nstep = q5 ? 15 : 20;
  constexpr float rdelta = 0.1f;
  const F zero = Lanes::set1(0.f);

  F sum_x2 = zero;
  for (int l = 0; l < 32; ++l) sum_x2 = Lanes::add(sum_x2, Lanes::mul(xt[l], xt[l]));
  const F av_x = Lanes::sqrt(Lanes::div(sum_x2, Lanes::set1(32.f)));
  F w[32];
  for (int l = 0; l < 32; ++l) w[l] = Lanes::add(av_x, Lanes::abs(xt[l]));

  F min = xt[0];
  F max = xt[0];
  F sum_w = w[0];
  F sum_x = Lanes::mul(sum_w, xt[0]);
  for (int i = 1; i < 32; ++i) {
    min = Lanes::blend(Lanes::lt(xt[i], min), min, xt[i]);
    max = Lanes::blend(Lanes::gt(xt[i], max), max, xt[i]);
    sum_w = Lanes::add(sum_w, w[i]);
    sum_x = Lanes::add(sum_x, Lanes::mul(w[i], xt[i]));
  }
  min = Lanes::blend(Lanes::gt(min, zero), min, zero);  // if (min > 0) min = 0 (keeps -0)
  const M flat = Lanes::eq(max, min);                     // max == min: L = 0, scale 0
  const F flat_min = min;

  F iscale = Lanes::div(Lanes::set1(float(kNmax)), Lanes::sub(max, min));
  F scale = Lanes::div(Lanes::set1(1.f), iscale);
  F best_error = zero;
  for (int i = 0; i < 32; ++i) {
    lt[i] = Lanes::clamp(Lanes::nearest(Lanes::mul(iscale, Lanes::sub(xt[i], min))), 0, kNmax);
    F diff = Lanes::sub(Lanes::add(Lanes::mul(scale, Lanes::to_float(lt[i])), min), xt[i]);
    diff = Lanes::mul(diff, diff);
    best_error = Lanes::add(best_error, Lanes::mul(w[i], diff));
  }
  I laux[32];
  F lf[32];
  for (int is = 0; is <= nstep; ++is) {
    const float trial = rmin + rdelta * float(is) + float(kNmax);  // (rmin + rdelta*is + nmax)
    iscale = Lanes::div(Lanes::set1(trial), Lanes::sub(max, min));
    F sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < 32; ++i) {
      laux[i] = Lanes::clamp(Lanes::nearest(Lanes::mul(iscale, Lanes::sub(xt[i], min))), 0, kNmax);
      lf[i] = Lanes::to_float(laux[i]);
      const F wl = Lanes::mul(w[i], lf[i]);
      sum_l = Lanes::add(sum_l, wl);
      sum_l2 = Lanes::add(sum_l2, Lanes::mul(wl, lf[i]));
      sum_xl = Lanes::add(sum_xl, Lanes::mul(wl, xt[i]));
    }
    const F D = Lanes::sub(Lanes::mul(sum_w, sum_l2), Lanes::mul(sum_l, sum_l));
    const M d_positive = Lanes::gt(D, zero);
    if (Lanes::none(d_positive)) continue;
    F this_scale = Lanes::div(Lanes::sub(Lanes::mul(sum_w, sum_xl), Lanes::mul(sum_x, sum_l)), D);
    F this_min = Lanes::div(Lanes::sub(Lanes::mul(sum_l2, sum_x), Lanes::mul(sum_l, sum_xl)), D);
    const M min_positive = Lanes::gt(this_min, zero);
    this_min = Lanes::blend(min_positive, this_min, zero);
    this_scale = Lanes::blend(min_positive, this_scale, Lanes::div(sum_xl, sum_l2));
    F cur_error = zero;
    for (int i = 0; i < 32; ++i) {
      F diff = Lanes::sub(Lanes::add(Lanes::mul(this_scale, lf[i]), this_min), xt[i]);
      diff = Lanes::mul(diff, diff);
      cur_error = Lanes::add(cur_error, Lanes::mul(w[i], diff));
    }
    const M better = Lanes::both(d_positive, Lanes::lt(cur_error, best_error));
    if (Lanes::none(better)) continue;
    for (int i = 0; i < 32; ++i) lt[i] = Lanes::blendi(better, lt[i], laux[i]);
    best_error = Lanes::blend(better, best_error, cur_error);
    scale = Lanes::blend(better, scale, this_scale);
    min = Lanes::blend(better, min, this_min);
  }
  if (!Lanes::none(flat)) {
    for (int i = 0; i < 32; ++i) lt[i] = Lanes::zero_where(flat, lt[i]);
    scale = Lanes::blend(flat, scale, zero);
    min = Lanes::blend(flat, min, flat_min);
  }
  *scale_out = scale;
  *the_min_out = Lanes::neg(min);  // -min
}

// k_block_levels with each sub-block's 32 values kWidth at a time.
template <int kNmax>
FERRY_LANES_TARGET void k_block_levels_lanes(const float* x, const uint8_t* y, uint8_t* L) {
  const float d_all = load_fp16(y);
  const float dmin_all = load_fp16(y + 2);
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, y + 4, &sc, &m);
    const float d = d_all * sc;
    if (d == 0.0f) continue;
    const F dv = Lanes::set1(d);
    const F dm = Lanes::set1(dmin_all * m);
    for (int h = 0; h < 32; h += kWidth) {
      const F v = Lanes::load(x + 32 * j + h);
      Lanes::store_bytes(L + 32 * j + h, Lanes::clamp(Lanes::nearest(Lanes::div(Lanes::add(v, dm), dv)), 0, kNmax));
    }
  }
}

// Q4_K / Q5_K blocks [begin, end): kWidth / 8 super-blocks per pass (lane k: sub-block k); a pass
// short of super-blocks repeats the last one in its spare lanes and drops their results.
template <int kNmax>
FERRY_LANES_TARGET void quantize_range_k_lanes(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  constexpr int64_t kBytes = kNmax == 31 ? 176 : 144;
  constexpr int kBlocksPerPass = kWidth / 8;
  for (int64_t b = begin; b < end; b += kBlocksPerPass) {
    const int blocks = int(end - b < kBlocksPerPass ? end - b : kBlocksPerPass);
    const float* base = x + b * kQkK;
    alignas(64) int32_t start[kWidth];
    for (int k = 0; k < kWidth; ++k) start[k] = ((k / 8) % blocks) * kQkK + (k % 8) * 32;
    F xt[32];
    for (int i = 0; i < 32; ++i) xt[i] = Lanes::gather(base + i, start);
    I lt[32];
    F scale_v, min_v;
    fit_qkx2_lanes<kNmax>(xt, lt, &scale_v, &min_v);
    alignas(64) float scales[kWidth];
    alignas(64) float mins[kWidth];
    Lanes::store(scales, scale_v);
    Lanes::store(mins, min_v);
    alignas(64) uint8_t levels_t[32][kWidth < 16 ? 16 : kWidth];  // [value][lane]
    for (int i = 0; i < 32; ++i) Lanes::store_bytes(levels_t[i], lt[i]);
    for (int half = 0; half < blocks; ++half) {
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
      k_block_levels_lanes<kNmax>(xb, y, L);
      k_block_pack<kNmax>(L, y);
    }
  }
}

// make_qx_quants(16, 32, x, L, rmse_type 1, NULL) in every lane.
FERRY_LANES_TARGET void fit_qx_lanes(const F* xt, I* lt, F* scale_out) {
  constexpr int nmax = 32;
  const F zero = Lanes::set1(0.f);
  F max = zero;
  F amax = zero;
  for (int i = 0; i < 16; ++i) {
    const F ax = Lanes::abs(xt[i]);
    const M larger = Lanes::gt(ax, amax);
    amax = Lanes::blend(larger, amax, ax);
    max = Lanes::blend(larger, max, xt[i]);
  }
  const M tiny = Lanes::lt(amax, Lanes::set1(kGroupMaxEps));  // all (near) zero: L 0, scale 0

  F w[16];
  for (int i = 0; i < 16; ++i) w[i] = Lanes::mul(xt[i], xt[i]);
  const I offset = Lanes::set1i(nmax);
  F iscale = Lanes::div(Lanes::set1(float(-nmax)), max);
  F sumlx = zero, suml2 = zero;
  for (int i = 0; i < 16; ++i) {
    const I l = Lanes::clamp(Lanes::nearest(Lanes::mul(iscale, xt[i])), -nmax, nmax - 1);
    lt[i] = Lanes::addi(l, offset);
    const F lf = Lanes::to_float(l);
    sumlx = Lanes::add(sumlx, Lanes::mul(Lanes::mul(w[i], xt[i]), lf));
    suml2 = Lanes::add(suml2, Lanes::mul(Lanes::mul(w[i], lf), lf));
  }
  // scale = suml2 ? sumlx / suml2 : 0 (a NaN suml2 counts as true)
  F scale = Lanes::blend(Lanes::ne_unordered(suml2, zero), zero, Lanes::div(sumlx, suml2));
  F best = Lanes::mul(scale, sumlx);
  I laux[16];
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float trial = float(nmax) + 0.1f * float(is);  // iscale = -(nmax + 0.1f*is) / max
    iscale = Lanes::div(Lanes::set1(-trial), max);
    sumlx = suml2 = zero;
    for (int i = 0; i < 16; ++i) {
      const I l = Lanes::clamp(Lanes::nearest(Lanes::mul(iscale, xt[i])), -nmax, nmax - 1);
      laux[i] = Lanes::addi(l, offset);
      const F lf = Lanes::to_float(l);
      sumlx = Lanes::add(sumlx, Lanes::mul(Lanes::mul(w[i], xt[i]), lf));
      suml2 = Lanes::add(suml2, Lanes::mul(Lanes::mul(w[i], lf), lf));
    }
    const M better = Lanes::both(Lanes::gt(suml2, zero),
                                 Lanes::gt(Lanes::mul(sumlx, sumlx), Lanes::mul(best, suml2)));
    if (Lanes::none(better)) continue;
    for (int i = 0; i < 16; ++i) lt[i] = Lanes::blendi(better, lt[i], laux[i]);
    scale = Lanes::blend(better, scale, Lanes::div(sumlx, suml2));
    best = Lanes::blend(better, best, Lanes::mul(scale, sumlx));
  }
  if (!Lanes::none(tiny)) {
    for (int i = 0; i < 16; ++i) lt[i] = Lanes::zero_where(tiny, lt[i]);
    scale = Lanes::blend(tiny, scale, zero);
  }
  *scale_out = scale;
}

FERRY_LANES_TARGET void q6_k_block_levels_lanes(const float* x, const uint8_t* y, int8_t* L) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(y + 192);
  const float d_all = load_fp16(y + 208);
  const I offset = Lanes::set1i(32);
  for (int j = 0; j < kQkK / 16; ++j) {
    const float d = d_all * sc[j];
    if (d == 0.0f) continue;
    const F dv = Lanes::set1(d);
    for (int h = 0; h < 16; h += kWidth) {
      const I l = Lanes::clamp(Lanes::nearest(Lanes::div(Lanes::load(x + 16 * j + h), dv)), -32, 31);
      Lanes::store_bytes(reinterpret_cast<uint8_t*>(L + 16 * j + h), Lanes::addi(l, offset));
    }
  }
}

// Q6_K blocks [begin, end): a block's 16 sub-blocks in 16 / kWidth passes.
FERRY_LANES_TARGET void quantize_range_q6_k_lanes(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  for (int64_t b = begin; b < end; ++b) {
    const float* xb = x + b * kQkK;
    uint8_t* y = out + b * 210;
    alignas(64) float scales[16];
    int8_t L[kQkK];
    for (int first = 0; first < 16; first += kWidth) {
      alignas(64) int32_t start[kWidth];
      for (int k = 0; k < kWidth; ++k) start[k] = (first + k) * 16;
      F xt[16];
      for (int i = 0; i < 16; ++i) xt[i] = Lanes::gather(xb + i, start);
      I lt[16];
      F scale_v;
      fit_qx_lanes(xt, lt, &scale_v);
      Lanes::store(scales + first, scale_v);
      alignas(64) uint8_t levels_t[16][kWidth < 16 ? 16 : kWidth];  // [value][lane]
      for (int i = 0; i < 16; ++i) Lanes::store_bytes(levels_t[i], lt[i]);
      for (int k = 0; k < kWidth; ++k) {
        for (int i = 0; i < 16; ++i) L[16 * (first + k) + i] = int8_t(levels_t[i][k]);
      }
    }
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (!q6_k_block_scales(scales, max_scale, max_abs_scale, y)) continue;
    q6_k_block_levels_lanes(xb, y, L);
    q6_k_block_pack(L, y);
  }
}

}  // namespace
}  // namespace ferry::kernels::ggml_detail
