// The AVX-512 paths of the K-type quantisers (ggml_quantize.h): ggml_quantize_lanes.h with 16
// lanes, so a pass fits two Q4_K / Q5_K super-blocks (16 sub-blocks of 32) or one Q6_K block (16
// sub-blocks of 16). Bitwise equal to the definitions in ggml_quantize_reference.cpp.
#include "kernels/cpu/ggml_quantize_internal.h"

#if defined(__x86_64__)
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_ps is `__Y = __Y`).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define FERRY_LANES_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace ferry::kernels::ggml_detail {
namespace {

struct Lanes {
  static constexpr int kWidth = 16;
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  FERRY_LANES_TARGET static F set1(float v) { return _mm512_set1_ps(v); }
  FERRY_LANES_TARGET static I set1i(int v) { return _mm512_set1_epi32(v); }
  FERRY_LANES_TARGET static F add(F a, F b) { return _mm512_add_ps(a, b); }
  FERRY_LANES_TARGET static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  FERRY_LANES_TARGET static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  FERRY_LANES_TARGET static F div(F a, F b) { return _mm512_div_ps(a, b); }
  FERRY_LANES_TARGET static F sqrt(F a) { return _mm512_sqrt_ps(a); }
  FERRY_LANES_TARGET static F abs(F a) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  FERRY_LANES_TARGET static F neg(F a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int32_t(0x80000000u))));
  }
  FERRY_LANES_TARGET static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  FERRY_LANES_TARGET static M gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  FERRY_LANES_TARGET static M eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  FERRY_LANES_TARGET static M ne_unordered(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
  static M both(M a, M b) { return M(a & b); }
  static bool none(M m) { return m == 0; }
  FERRY_LANES_TARGET static F blend(M m, F a, F b) { return _mm512_mask_blend_ps(m, a, b); }
  FERRY_LANES_TARGET static I blendi(M m, I a, I b) { return _mm512_mask_blend_epi32(m, a, b); }
  FERRY_LANES_TARGET static I zero_where(M m, I a) { return _mm512_maskz_mov_epi32(M(~m), a); }
  FERRY_LANES_TARGET static I nearest(F x) {
    const I bits = _mm512_castps_si512(_mm512_add_ps(x, _mm512_set1_ps(12582912.f)));
    return _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
  }
  FERRY_LANES_TARGET static I clamp(I l, int lo, int hi) {
    return _mm512_max_epi32(_mm512_set1_epi32(lo), _mm512_min_epi32(_mm512_set1_epi32(hi), l));
  }
  FERRY_LANES_TARGET static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  FERRY_LANES_TARGET static I addi(I a, I b) { return _mm512_add_epi32(a, b); }
  FERRY_LANES_TARGET static F gather(const float* base, const int32_t* offsets) {
    return _mm512_i32gather_ps(_mm512_load_si512(offsets), base, 4);
  }
  FERRY_LANES_TARGET static F load(const float* p) { return _mm512_loadu_ps(p); }
  FERRY_LANES_TARGET static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  FERRY_LANES_TARGET static void store_bytes(uint8_t* p, I v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
};

}  // namespace
}  // namespace ferry::kernels::ggml_detail

#include "kernels/cpu/ggml_quantize_lanes.h"

namespace ferry::kernels::ggml_detail {

void quantize_range_q4_k_avx512(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_k_lanes<15>(x, begin, end, out);
}
void quantize_range_q5_k_avx512(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_k_lanes<31>(x, begin, end, out);
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
