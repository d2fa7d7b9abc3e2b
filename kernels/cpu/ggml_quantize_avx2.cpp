// The AVX2 paths of the K-type quantisers (ggml_quantize.h), for CPUs without AVX-512 (most
// laptops): ggml_quantize_lanes.h with 8 lanes, so a pass fits one Q4_K / Q5_K super-block (8
// sub-blocks of 32) or half a Q6_K block (8 sub-blocks of 16). Masks are whole lanes of ones;
// blends are blendv. Bitwise equal to the definitions in ggml_quantize_reference.cpp.
#include "kernels/cpu/ggml_quantize_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define FERRY_LANES_TARGET __attribute__((target("avx2,fma,f16c")))

namespace ferry::kernels::ggml_detail {
namespace {

struct Lanes {
  static constexpr int kWidth = 8;
  using F = __m256;
  using I = __m256i;
  using M = __m256;  // all ones in a true lane
  FERRY_LANES_TARGET static F set1(float v) { return _mm256_set1_ps(v); }
  FERRY_LANES_TARGET static I set1i(int v) { return _mm256_set1_epi32(v); }
  FERRY_LANES_TARGET static F add(F a, F b) { return _mm256_add_ps(a, b); }
  FERRY_LANES_TARGET static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  FERRY_LANES_TARGET static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  FERRY_LANES_TARGET static F div(F a, F b) { return _mm256_div_ps(a, b); }
  FERRY_LANES_TARGET static F sqrt(F a) { return _mm256_sqrt_ps(a); }
  FERRY_LANES_TARGET static F abs(F a) {
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7fffffff)));
  }
  FERRY_LANES_TARGET static F neg(F a) {
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(a), _mm256_set1_epi32(int32_t(0x80000000u))));
  }
  FERRY_LANES_TARGET static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  FERRY_LANES_TARGET static M gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  FERRY_LANES_TARGET static M eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  FERRY_LANES_TARGET static M ne_unordered(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
  FERRY_LANES_TARGET static M both(M a, M b) { return _mm256_and_ps(a, b); }
  FERRY_LANES_TARGET static bool none(M m) { return _mm256_movemask_ps(m) == 0; }
  FERRY_LANES_TARGET static F blend(M m, F a, F b) { return _mm256_blendv_ps(a, b, m); }
  FERRY_LANES_TARGET static I blendi(M m, I a, I b) {
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), m));
  }
  FERRY_LANES_TARGET static I zero_where(M m, I a) { return _mm256_andnot_si256(_mm256_castps_si256(m), a); }
  FERRY_LANES_TARGET static I nearest(F x) {
    const I bits = _mm256_castps_si256(_mm256_add_ps(x, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
  }
  FERRY_LANES_TARGET static I clamp(I l, int lo, int hi) {
    return _mm256_max_epi32(_mm256_set1_epi32(lo), _mm256_min_epi32(_mm256_set1_epi32(hi), l));
  }
  FERRY_LANES_TARGET static F to_float(I a) { return _mm256_cvtepi32_ps(a); }
  FERRY_LANES_TARGET static I addi(I a, I b) { return _mm256_add_epi32(a, b); }
  FERRY_LANES_TARGET static F gather(const float* base, const int32_t* offsets) {
    return _mm256_i32gather_ps(base, _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets)), 4);
  }
  FERRY_LANES_TARGET static F load(const float* p) { return _mm256_loadu_ps(p); }
  FERRY_LANES_TARGET static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  // The low byte of each lane: bytes 0, 4, 8, 12 of each 128-bit half, then the halves' dwords 0 and 4.
  FERRY_LANES_TARGET static void store_bytes(uint8_t* p, I v) {
    const I shuffle = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const I packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, shuffle), _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
};

}  // namespace
}  // namespace ferry::kernels::ggml_detail

#include "kernels/cpu/ggml_quantize_lanes.h"

namespace ferry::kernels::ggml_detail {

void quantize_range_q4_k_avx2(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_k_lanes<15>(x, begin, end, out);
}
void quantize_range_q5_k_avx2(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_k_lanes<31>(x, begin, end, out);
}
void quantize_range_q6_k_avx2(const float* x, int64_t begin, int64_t end, uint8_t* out) {
  quantize_range_q6_k_lanes(x, begin, end, out);
}

}  // namespace ferry::kernels::ggml_detail

#else  // not x86-64: the definitions (best_simd_level() never reports avx2 there)

namespace ferry::kernels::ggml_detail {
void quantize_range_q4_k_avx2(const float* x, int64_t b, int64_t e, uint8_t* out) { quantize_range_q4_k(x, b, e, out); }
void quantize_range_q5_k_avx2(const float* x, int64_t b, int64_t e, uint8_t* out) { quantize_range_q5_k(x, b, e, out); }
void quantize_range_q6_k_avx2(const float* x, int64_t b, int64_t e, uint8_t* out) { quantize_range_q6_k(x, b, e, out); }
}  // namespace ferry::kernels::ggml_detail

#endif
