// Scalar conversions between fp32 and the 16-bit float formats (bfloat16, IEEE fp16), rounding
// to nearest-even exactly as torch does (`tensor.to(torch::kBFloat16 / kHalf)`). These are the
// reference the SIMD conversions in the kernels are tested against; they are header-only so the
// scalar kernels inline them.
#pragma once

#include <bit>
#include <cstdint>

namespace ferry::kernels {

// bfloat16 is the top half of an fp32, so widening is a shift.
inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Round-to-nearest-even by adding 0x7fff plus the lowest kept bit, then truncating (carries into
// the exponent give the right result, up to infinity). NaN becomes the canonical quiet NaN, as in
// c10::BFloat16, because the rounding add could otherwise turn a NaN payload into infinity.
inline uint16_t float_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// IEEE half -> float is exact: rebias the exponent; subnormals are m * 2^-24 (exact in fp32).
inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = float(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// float -> IEEE half, round-to-nearest-even, with overflow to infinity and gradual underflow.
inline uint16_t float_to_fp16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the result is a half subnormal, a multiple of 2^-24. Adding 0.5 (whose fp32 ulp
    // is 2^-24) makes the FPU round the value to that grid, nearest-even; the low bits are the
    // half's mantissa (0x400, the smallest normal, when it rounds up out of the subnormals).
    const float rounded = std::bit_cast<float>(magnitude) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(rounded) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even.
  const uint32_t odd = (magnitude >> 13) & 1u;
  return uint16_t(sign | ((magnitude - (112u << 23) + 0xfffu + odd) >> 13));
}

}  // namespace ferry::kernels
