// Int8-moment AdamW step, AVX-512 path: adamw_int8_avx2.cpp's two loops per block at 16 parameters
// per iteration, with mask registers where AVX2 needs sign tricks, and the codes narrowed to bytes
// by the saturating VPMOVSDB / VPMOVUSDB. The last count % 16 parameters of a partial block go
// through the scalar definition, which rounds identically; so the result is bit for bit the
// reference's. Compiled with a function-level target attribute, like adamw_avx512.cpp.
#include "kernels/cpu/adamw_int8_internal.h"

#if defined(__x86_64__)
#include <algorithm>

#include "kernels/cpu/avx512_common.h"

namespace ferry::kernels::adamw_int8_detail {
namespace {

using avx512::load_grad;
using avx512::rounded;

FERRY_AVX512 inline __m512i splat(int32_t x) { return _mm512_set1_epi32(x); }

// Magnitude codes (int32 lanes, >= 0) -> their values: the bit pattern (c + offset) << shift, 0
// for code 0.
template <int32_t kOffset, int kShift>
FERRY_AVX512 inline __m512 magnitude(__m512i code) {
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(_mm512_test_epi32_mask(code, code), _mm512_add_epi32(code, splat(kOffset)), kShift));
}

// decode_exp_avg for the 16 codes at `codes`.
FERRY_AVX512 inline __m512 decode_exp_avg(const int8_t* codes, __m512 scale) {
  const __m512i c = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m512 value = rounded(_mm512_mul_ps(magnitude<kExpAvgOffset, kExpAvgShift>(_mm512_abs_epi32(c)), scale));
  const __m512i sign = _mm512_and_si512(c, splat(int32_t(kSignBit)));
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(value), sign));
}

// decode_exp_avg_sq_root for the 16 codes at `codes`.
FERRY_AVX512 inline __m512 decode_exp_avg_sq_root(const uint8_t* codes, __m512 scale) {
  const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  return rounded(_mm512_mul_ps(magnitude<kExpAvgSqOffset, kExpAvgSqShift>(c), scale));
}

// round_to_code on 16 lanes.
template <int kShift, int32_t kOffset>
FERRY_AVX512 inline __m512i round_to_code(__m512 x) {
  return _mm512_srai_epi32(_mm512_add_epi32(_mm512_castps_si512(x), splat(int32_t(rounding_addend(kShift, kOffset)))),
                           kShift);
}

// encode_exp_avg on 16 lanes, narrowed to bytes with signed saturation (as the scalar clamp).
FERRY_AVX512 inline __m128i encode_exp_avg(__m512 m, __m512 inverse_scale) {
  const __m512i bits = _mm512_castps_si512(m);
  const __m512 magnitude_of_m = _mm512_castsi512_ps(_mm512_andnot_si512(splat(int32_t(kSignBit)), bits));
  const __m512 x = _mm512_mul_ps(magnitude_of_m, inverse_scale);
  // 1 where x >= half of code 1's value (round to nearest between 0 and code 1).
  const __m512i smallest = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpAvgHalfSmallest), _CMP_GE_OQ),
                                                  splat(1));
  const __m512i magnitude = _mm512_max_epi32(round_to_code<kExpAvgShift, kExpAvgOffset>(x), smallest);
  // Negated where m's sign bit is set.
  const __m512i code = _mm512_mask_sub_epi32(magnitude, _mm512_cmplt_epi32_mask(bits, _mm512_setzero_si512()),
                                             _mm512_setzero_si512(), magnitude);
  return _mm512_cvtsepi32_epi8(code);
}

// encode_exp_avg_sq_root on 16 lanes, narrowed to bytes with unsigned saturation (the codes are >= 0).
FERRY_AVX512 inline __m128i encode_exp_avg_sq_root(__m512 s, __m512 inverse_scale) {
  const __m512 x = _mm512_mul_ps(s, inverse_scale);
  const __m512i smallest = _mm512_min_epu32(_mm512_castps_si512(x), splat(1));  // 1 where x's bits are not 0
  return _mm512_cvtusepi32_epi8(_mm512_max_epi32(round_to_code<kExpAvgSqShift, kExpAvgSqOffset>(x), smallest));
}

// Per block, the two loops of the AVX2 path over L1-resident buffers: (1) dequantise, update m and
// v, s = sqrt(v), track the absmaxes; (2) the master weight update beside the requantisation. Every
// value goes through the same operations as in the scalar update_element.
template <GradType kGrad, WeightOutType kOut>
FERRY_AVX512 void update(const Coefficients& c, float* const master, const Int8Moments& q, const void* const grad,
                         void* const weight_out, const int64_t n) {
  const bool scale = c.scale, decay = c.decay;
  const avx512::Coefficients16 k(c);
  const __m512i sign_bit = splat(int32_t(kSignBit));
  int8_t* const m_codes = q.exp_avg;
  uint8_t* const s_codes = q.exp_avg_sq;
  float* const m_scales = q.exp_avg_scale;
  float* const s_scales = q.exp_avg_sq_scale;
  // The block's new m and sqrt(v), in L1 between the two loops.
  alignas(64) float new_m[kInt8MomentBlock];
  alignas(64) float new_s[kInt8MomentBlock];
  for (int64_t start = 0, block = 0; start < n; start += kInt8MomentBlock, ++block) {
    const int64_t count = std::min(kInt8MomentBlock, n - start);
    const int64_t vector_count = count - count % 16;
    const __m512 scale_m = _mm512_set1_ps(m_scales[block]);
    const __m512 scale_s = _mm512_set1_ps(s_scales[block]);
    __m512 max_m = _mm512_setzero_ps(), max_s = _mm512_setzero_ps();
    for (int64_t j = 0; j < vector_count; j += 16) {
      const int64_t i = start + j;
      __m512 g = load_grad<kGrad>(grad, i);
      if (scale) g = rounded(_mm512_mul_ps(g, k.grad_scale));
      __m512 m = decode_exp_avg(m_codes + i, scale_m);
      const __m512 s_old = decode_exp_avg_sq_root(s_codes + i, scale_s);
      const __m512 v_old = rounded(_mm512_mul_ps(s_old, s_old));
      m = _mm512_fmadd_ps(k.one_minus_beta1, _mm512_sub_ps(g, m), m);
      const __m512 v =
          _mm512_fmadd_ps(rounded(_mm512_mul_ps(k.one_minus_beta2, g)), g, rounded(_mm512_mul_ps(v_old, k.beta2)));
      const __m512 s = _mm512_sqrt_ps(v);
      _mm512_store_ps(new_m + j, m);
      _mm512_store_ps(new_s + j, s);
      // MAXPS returns its second operand when either is NaN: NaNs are skipped, as running_max does.
      max_m = _mm512_max_ps(_mm512_castsi512_ps(_mm512_andnot_si512(sign_bit, _mm512_castps_si512(m))), max_m);
      max_s = _mm512_max_ps(s, max_s);
    }
    // The lanes hold no NaN, so the order of the reduction does not matter.
    float absmax_m = _mm512_reduce_max_ps(max_m), absmax_s = _mm512_reduce_max_ps(max_s);
    // Only in a partial last block: the whole step of the last count % lanes parameters.
    update_elements(c, master, q, block, start, vector_count, count, grad, kGrad, weight_out, kOut, new_m, new_s,
                    absmax_m, absmax_s);

    const BlockScale sm = block_scale(absmax_m), ss = block_scale(absmax_s);
    const __m512 inverse_m = _mm512_set1_ps(sm.inverse), inverse_s = _mm512_set1_ps(ss.inverse);
    for (int64_t j = 0; j < vector_count; j += 16) {
      const int64_t i = start + j;
      const __m512 m = _mm512_load_ps(new_m + j), s = _mm512_load_ps(new_s + j);
      __m512 p = _mm512_loadu_ps(master + i);
      if (decay) p = rounded(_mm512_mul_ps(p, k.decay_factor));
      const __m512 denom = _mm512_add_ps(_mm512_div_ps(s, k.bias_correction2_sqrt), k.eps);
      p = _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(k.neg_step_size, m), denom));
      _mm512_storeu_ps(master + i, p);
      avx512::store_weight_out<kOut>(weight_out, i, p);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(m_codes + i), encode_exp_avg(m, inverse_m));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(s_codes + i), encode_exp_avg_sq_root(s, inverse_s));
    }
    // The codes the vectors did not write, and the block's scales.
    encode_block(new_m + vector_count, new_s + vector_count, count - vector_count, absmax_m, absmax_s,
                 m_codes + start + vector_count, s_codes + start + vector_count, m_scales + block, s_scales + block);
  }
}

}  // namespace

void update_range_avx512(const Coefficients& c, float* master, const Int8Moments& q, const void* grad,
                         GradType grad_type, void* weight_out, WeightOutType weight_out_type, int64_t n) {
  with_types(grad_type, weight_out_type, [&]<GradType kGrad, WeightOutType kOut>() {
    update<kGrad, kOut>(c, master, q, grad, weight_out, n);
  });
}

}  // namespace ferry::kernels::adamw_int8_detail

#else  // not x86-64: never selected (cpu_supports(avx512) is false), kept only so the symbol exists.

namespace ferry::kernels::adamw_int8_detail {
void update_range_avx512(const Coefficients& c, float* master, const Int8Moments& q, const void* grad,
                         GradType grad_type, void* weight_out, WeightOutType weight_out_type, int64_t n) {
  update_range_scalar(c, master, q, grad, grad_type, weight_out, weight_out_type, n);
}
}  // namespace ferry::kernels::adamw_int8_detail

#endif
