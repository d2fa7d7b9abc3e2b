// The definitions of ggml_quantize.h: llama.cpp's reference quantisers (ggml-quants.c,
// quantize_row_*_ref and the make_qkx2_quants / make_qx_quants fits they call) translated line by
// line, one block at a time. Each float expression keeps the C code's operand order and types (an
// int promoted where the C promotes it), so each rounds where the C rounds; the file is compiled
// with -ffp-contract=off (CMakeLists.txt) so no product is fused into a sum.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cpu/ggml_quantize_internal.h"

namespace ferry::kernels::ggml_detail {
namespace {

// quantize_row_q4_0_ref / quantize_row_q5_0_ref: d = max / -(levels / 2), where max is the value
// with the largest magnitude (the first of equal magnitudes).
template <int kLevels>
void quantize_symmetric_block(const float* x, uint8_t* y) {
  constexpr int qk = 32;
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < qk; j++) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -float(kLevels / 2);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_fp16(y, d);
  if constexpr (kLevels == 16) {  // Q4_0: half d; 16 bytes of nibbles
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[0 + j] * id;
      const float x1 = x[qk / 2 + j] * id;
      const uint8_t xi0 = std::min<int>(15, static_cast<int8_t>(static_cast<int>(x0 + 8.5f)));
      const uint8_t xi1 = std::min<int>(15, static_cast<int8_t>(static_cast<int>(x1 + 8.5f)));
      y[2 + j] = uint8_t(xi0 | (xi1 << 4));
    }
  } else {  // Q5_0: half d; u32 fifth bits; 16 bytes of low nibbles
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[0 + j] * id;
      const float x1 = x[qk / 2 + j] * id;
      const uint8_t xi0 = std::min<int>(31, static_cast<int8_t>(static_cast<int>(x0 + 16.5f)));
      const uint8_t xi1 = std::min<int>(31, static_cast<int8_t>(static_cast<int>(x1 + 16.5f)));
      y[6 + j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(y + 2, &qh, sizeof(qh));
  }
}

// quantize_row_q5_1_ref.
void quantize_q5_1_block(const float* x, uint8_t* y) {
  constexpr int qk = 32;
  float min = FLT_MAX;
  float max = -FLT_MAX;
  for (int j = 0; j < qk; j++) {
    const float v = x[j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const float d = (max - min) / ((1 << 5) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_fp16(y, d);
  store_fp16(y + 2, min);
  uint32_t qh = 0;
  for (int j = 0; j < qk / 2; ++j) {
    const float x0 = (x[0 + j] - min) * id;
    const float x1 = (x[qk / 2 + j] - min) * id;
    const uint8_t xi0 = static_cast<uint8_t>(static_cast<int>(x0 + 0.5f));
    const uint8_t xi1 = static_cast<uint8_t>(static_cast<int>(x1 + 0.5f));
    y[8 + j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
  }
  std::memcpy(y + 4, &qh, sizeof(qh));
}

// quantize_row_q8_0_ref: MAX(amax, fabsf(v)) as the C macro (a NaN makes amax NaN).
void quantize_q8_0_block(const float* x, uint8_t* y) {
  constexpr int qk = 32;
  float amax = 0.0f;
  for (int j = 0; j < qk; j++) {
    const float v = std::fabs(x[j]);
    amax = amax > v ? amax : v;
  }
  const float d = amax / ((1 << 7) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_fp16(y, d);
  for (int j = 0; j < qk; ++j) {
    const float x0 = x[j] * id;
    y[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(std::roundf(x0))));
  }
}

// make_qkx2_quants (use_mad false): a scale and min for n values, weights `weights`, by trying
// nstep + 1 scales around nmax / (max - min) and keeping the least weighted squared error.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    const float w = weights[i];
    best_error += w * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = diff * diff;
        const float w = weights[i];
        cur_error += w * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// quantize_row_q4_K_ref (kNmax 15) and quantize_row_q5_K_ref (kNmax 31) for one super-block.
template <int kNmax>
void quantize_k_block(const float* x, uint8_t* y) {
  constexpr bool q5 = kNmax == 31;
  constexpr float rmin = q5 ? -0.5f : -1.f;
  constexpr int nstep = q5 ? 15 : 20;
  uint8_t L[kQkK];
  uint8_t Laux[32];
  float weights[32];
  float mins[kQkK / 32];
  float scales[kQkK / 32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kQkK / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, kNmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
    const float scale = scales[j];
    if (scale > max_scale) max_scale = scale;
    const float min = mins[j];
    if (min > max_min) max_min = min;
  }
  k_block_scales<kNmax>(scales, mins, max_scale, max_min, y);
  k_block_levels<kNmax>(x, y, L);
  k_block_pack<kNmax>(L, y);
}

// quantize_row_q6_K_ref's make_qx_quants(16, 32, x, L, rmse_type 1, NULL): 19 scale trials around
// -32 / max, weights x^2.
float make_qx_quants_q6(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_q6_k_block(const float* x, uint8_t* y) {
  int8_t L[kQkK];
  float scales[kQkK / 16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < kQkK / 16; ++ib) {
    const float scale = make_qx_quants_q6(x + 16 * ib, L + 16 * ib);
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (!q6_k_block_scales(scales, max_scale, max_abs_scale, y)) return;
  q6_k_block_levels(x, y, L);
  q6_k_block_pack(L, y);
}

template <void (*kBlock)(const float*, uint8_t*), int64_t kElements, int64_t kBytes>
void quantize_blocks(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  for (int64_t b = begin; b < end; ++b) kBlock(x + b * kElements, out + b * kBytes);
}

}  // namespace

void quantize_range_q4_0(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_symmetric_block<16>, 32, 18>(x, begin, end, out);
}
void quantize_range_q5_0(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_symmetric_block<32>, 32, 22>(x, begin, end, out);
}
void quantize_range_q5_1(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_q5_1_block, 32, 24>(x, begin, end, out);
}
void quantize_range_q8_0(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_q8_0_block, 32, 34>(x, begin, end, out);
}
void quantize_range_q4_k(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_k_block<15>, kQkK, 144>(x, begin, end, out);
}
void quantize_range_q5_k(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_k_block<31>, kQkK, 176>(x, begin, end, out);
}
void quantize_range_q6_k(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_blocks<quantize_q6_k_block, kQkK, 210>(x, begin, end, out);
}

}  // namespace ferry::kernels::ggml_detail
