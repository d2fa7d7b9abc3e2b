// Int8-moment AdamW step, AVX2 + FMA + F16C path: per block, one loop of 8 parameters per iteration
// for the moments, one for the master weights and the codes (32 at a time); the last count % 8
// parameters of a partial block go through the scalar definition, which rounds identically. The
// same integer and float operations as the scalar codes in adamw_int8_internal.h, lane by lane, so
// the result is bit for bit the reference's. Compiled with a function-level target attribute, like
// adamw_avx2.cpp (whose gradient load and bf16 rounding, kernels/cpu/avx2_common.h, it shares).
#include "kernels/cpu/adamw_int8_internal.h"

#if defined(__x86_64__)
#include <algorithm>

#include "kernels/cpu/avx2_common.h"

namespace ferry::kernels::adamw_int8_detail {
namespace {

FERRY_AVX2 inline __m256i splat(int32_t x) { return _mm256_set1_epi32(x); }

using avx2::load_grad;
using avx2::rounded;

// Magnitude codes (int32 lanes, >= 0) -> their values: the bit pattern (c + offset) << shift, 0
// for code 0 (sign_epi32 zeroes the lanes whose code is 0).
template <int32_t kOffset, int kShift>
FERRY_AVX2 inline __m256 magnitude(__m256i code) {
  return _mm256_castsi256_ps(_mm256_sign_epi32(_mm256_slli_epi32(_mm256_add_epi32(code, splat(kOffset)), kShift), code));
}

// decode_exp_avg for the 8 codes at `codes`.
FERRY_AVX2 inline __m256 decode_exp_avg(const int8_t* codes, __m256 scale) {
  const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  const __m256 value = rounded(_mm256_mul_ps(magnitude<kExpAvgOffset, kExpAvgShift>(_mm256_abs_epi32(c)), scale));
  return _mm256_xor_ps(value, _mm256_castsi256_ps(_mm256_and_si256(c, splat(int32_t(kSignBit)))));
}

// decode_exp_avg_sq_root for the 8 codes at `codes`.
FERRY_AVX2 inline __m256 decode_exp_avg_sq_root(const uint8_t* codes, __m256 scale) {
  const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  return rounded(_mm256_mul_ps(magnitude<kExpAvgSqOffset, kExpAvgSqShift>(c), scale));
}

// round_to_code on 8 lanes.
template <int kShift, int32_t kOffset>
FERRY_AVX2 inline __m256i round_to_code(__m256 x) {
  return _mm256_srai_epi32(_mm256_add_epi32(_mm256_castps_si256(x), splat(int32_t(rounding_addend(kShift, kOffset)))),
                           kShift);
}

// encode_exp_avg on 8 lanes, as int32 codes (saturated to a byte by the packing).
FERRY_AVX2 inline __m256i encode_exp_avg(__m256 m, __m256 inverse_scale) {
  const __m256 x = _mm256_mul_ps(_mm256_andnot_ps(_mm256_castsi256_ps(splat(int32_t(kSignBit))), m), inverse_scale);
  // 1 where x >= half of code 1's value (round to nearest between 0 and code 1).
  const __m256i smallest =
      _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(x, _mm256_set1_ps(kExpAvgHalfSmallest), _CMP_GE_OQ)), splat(1));
  const __m256i magnitude = _mm256_max_epi32(round_to_code<kExpAvgShift, kExpAvgOffset>(x), smallest);
  // sign_epi32 negates where m's bits are negative (sign set) and zeroes where they are 0 (m = +0,
  // whose code is 0 anyway).
  return _mm256_sign_epi32(magnitude, _mm256_castps_si256(m));
}

// encode_exp_avg_sq_root on 8 lanes, as int32 codes (saturated to a byte by the packing).
FERRY_AVX2 inline __m256i encode_exp_avg_sq_root(__m256 s, __m256 inverse_scale) {
  const __m256 x = _mm256_mul_ps(s, inverse_scale);
  const __m256i smallest = _mm256_min_epu32(_mm256_castps_si256(x), splat(1));  // 1 where x's bits are not 0
  return _mm256_max_epi32(round_to_code<kExpAvgSqShift, kExpAvgSqOffset>(x), smallest);
}

// Four vectors of int32 codes -> 32 bytes in order, saturating (only non-finite moments give codes
// beyond a byte; the scalar encoders clamp alike). The packs work within 128-bit lanes, leaving
// dwords a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7; the permute restores the order.
FERRY_AVX2 inline __m256i in_order(__m256i packed) {
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
FERRY_AVX2 inline __m256i pack_signed(__m256i a, __m256i b, __m256i c, __m256i d) {
  return in_order(_mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d)));
}
FERRY_AVX2 inline __m256i pack_unsigned(__m256i a, __m256i b, __m256i c, __m256i d) {
  return in_order(_mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d)));
}

// Max over the 8 lanes (none is NaN: the running maxima skip NaNs, as running_max does).
FERRY_AVX2 inline float horizontal_max(__m256 x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}


// Per block, two loops over L1-resident buffers, each mixing long-latency and short independent work
// so the out-of-order core keeps its pipes busy: (1) dequantise, update m and v, s = sqrt(v), track
// the absmaxes; (2) the master weight update (two divisions) beside the requantisation of m and s.
// Every value goes through the same operations as in the scalar update_element. (Measured on Zen 2,
// in cache: 14% faster than the whole fp32 step in loop 1 and only the codes in loop 2; moving the
// first division into loop 1 was 7% slower; software-pipelining loop 1 of block b with loop 2 of
// block b - 1 gained 2%, not worth its code.)
template <GradType kGrad, WeightOutType kOut>
FERRY_AVX2 void update(const Coefficients& c, float* const master, const Int8Moments& q, const void* const grad,
                       void* const weight_out, const int64_t n) {
  const bool scale = c.scale, decay = c.decay;
  const avx2::Coefficients8 k(c);
  const __m256 sign_bit = _mm256_castsi256_ps(splat(int32_t(kSignBit)));
  int8_t* const m_codes = q.exp_avg;
  uint8_t* const s_codes = q.exp_avg_sq;
  float* const m_scales = q.exp_avg_scale;
  float* const s_scales = q.exp_avg_sq_scale;
  // The block's new m and sqrt(v), in L1 between the two loops.
  alignas(32) float new_m[kInt8MomentBlock];
  alignas(32) float new_s[kInt8MomentBlock];
  for (int64_t start = 0, block = 0; start < n; start += kInt8MomentBlock, ++block) {
    const int64_t count = std::min(kInt8MomentBlock, n - start);
    const int64_t vector_count = count - count % 8;
    const __m256 scale_m = _mm256_set1_ps(m_scales[block]);
    const __m256 scale_s = _mm256_set1_ps(s_scales[block]);
    __m256 max_m = _mm256_setzero_ps(), max_s = _mm256_setzero_ps();
    for (int64_t j = 0; j < vector_count; j += 8) {
      const int64_t i = start + j;
      __m256 g = load_grad<kGrad>(grad, i);
      if (scale) g = rounded(_mm256_mul_ps(g, k.grad_scale));
      __m256 m = decode_exp_avg(m_codes + i, scale_m);
      const __m256 s_old = decode_exp_avg_sq_root(s_codes + i, scale_s);
      const __m256 v_old = rounded(_mm256_mul_ps(s_old, s_old));
      m = _mm256_fmadd_ps(k.one_minus_beta1, _mm256_sub_ps(g, m), m);
      const __m256 v =
          _mm256_fmadd_ps(rounded(_mm256_mul_ps(k.one_minus_beta2, g)), g, rounded(_mm256_mul_ps(v_old, k.beta2)));
      const __m256 s = _mm256_sqrt_ps(v);
      _mm256_store_ps(new_m + j, m);
      _mm256_store_ps(new_s + j, s);
      max_m = _mm256_max_ps(_mm256_andnot_ps(sign_bit, m), max_m);
      max_s = _mm256_max_ps(s, max_s);
    }
    float absmax_m = horizontal_max(max_m), absmax_s = horizontal_max(max_s);
    // Only in a partial last block: the whole step of the last count % lanes parameters.
    update_elements(c, master, q, block, start, vector_count, count, grad, kGrad, weight_out, kOut, new_m, new_s,
                    absmax_m, absmax_s);

    const BlockScale sm = block_scale(absmax_m), ss = block_scale(absmax_s);
    const __m256 inverse_m = _mm256_set1_ps(sm.inverse), inverse_s = _mm256_set1_ps(ss.inverse);
    // The master weights of 8 parameters at j from the buffered m and s.
    auto update_master = [&](int64_t j) FERRY_AVX2 {
      const int64_t i = start + j;
      __m256 p = _mm256_loadu_ps(master + i);
      if (decay) p = rounded(_mm256_mul_ps(p, k.decay_factor));
      const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_load_ps(new_s + j), k.bias_correction2_sqrt), k.eps);
      p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(k.neg_step_size, _mm256_load_ps(new_m + j)), denom));
      _mm256_storeu_ps(master + i, p);
      avx2::store_weight_out<kOut>(weight_out, i, p);
    };
    const int64_t packed_count = count - count % 32;
    for (int64_t j = 0; j < packed_count; j += 32) {
      update_master(j);
      update_master(j + 8);
      update_master(j + 16);
      update_master(j + 24);
      const __m256i m32 = pack_signed(
          encode_exp_avg(_mm256_load_ps(new_m + j), inverse_m), encode_exp_avg(_mm256_load_ps(new_m + j + 8), inverse_m),
          encode_exp_avg(_mm256_load_ps(new_m + j + 16), inverse_m),
          encode_exp_avg(_mm256_load_ps(new_m + j + 24), inverse_m));
      const __m256i s32 = pack_unsigned(encode_exp_avg_sq_root(_mm256_load_ps(new_s + j), inverse_s),
                                        encode_exp_avg_sq_root(_mm256_load_ps(new_s + j + 8), inverse_s),
                                        encode_exp_avg_sq_root(_mm256_load_ps(new_s + j + 16), inverse_s),
                                        encode_exp_avg_sq_root(_mm256_load_ps(new_s + j + 24), inverse_s));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(m_codes + start + j), m32);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s_codes + start + j), s32);
    }
    for (int64_t j = packed_count; j < vector_count; j += 8) update_master(j);
    // The codes the vectors did not write, and the block's scales.
    encode_block(new_m + packed_count, new_s + packed_count, count - packed_count, absmax_m, absmax_s,
                 m_codes + start + packed_count, s_codes + start + packed_count, m_scales + block, s_scales + block);
  }
}

}  // namespace

void update_range_avx2(const Coefficients& c, float* master, const Int8Moments& q, const void* grad,
                       GradType grad_type, void* weight_out, WeightOutType weight_out_type, int64_t n) {
  with_types(grad_type, weight_out_type, [&]<GradType kGrad, WeightOutType kOut>() {
    update<kGrad, kOut>(c, master, q, grad, weight_out, n);
  });
}

}  // namespace ferry::kernels::adamw_int8_detail

#else  // not x86-64: never selected (cpu_supports(avx2) is false), kept only so the symbol exists.

namespace ferry::kernels::adamw_int8_detail {
void update_range_avx2(const Coefficients& c, float* master, const Int8Moments& q, const void* grad,
                       GradType grad_type, void* weight_out, WeightOutType weight_out_type, int64_t n) {
  update_range_scalar(c, master, q, grad, grad_type, weight_out, weight_out_type, n);
}
}  // namespace ferry::kernels::adamw_int8_detail

#endif
