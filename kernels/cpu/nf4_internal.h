// NF4 range kernels and constants shared by nf4.cpp (the scalar definition, threading) and nf4_avx2.cpp.
#pragma once

#include <cstdint>

#include "kernels/cpu/nf4.h"

namespace ferry::kernels::nf4_detail {

// Dequantises blocks [block_begin, block_end) of a tensor of n elements into out (indexed from the
// tensor's start). The scalar one is the definition; the AVX2 one equals it bit for bit.
using DequantizeRange = void (*)(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                                 int64_t block_begin, int64_t block_end, void* out, Nf4ValueType out_type);
void dequantize_range_scalar(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                             int64_t block_begin, int64_t block_end, void* out, Nf4ValueType out_type);
void dequantize_range_avx2(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                           int64_t block_begin, int64_t block_end, void* out, Nf4ValueType out_type);

// Quantises blocks [block_begin, block_end) of x[0, n). Scalar: the definition; AVX2: bitwise equal.
using QuantizeRange = void (*)(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, int64_t block_begin,
                               int64_t block_end, uint8_t* packed, float* absmax);
void quantize_range_scalar(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, int64_t block_begin,
                           int64_t block_end, uint8_t* packed, float* absmax);
void quantize_range_avx2(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, int64_t block_begin,
                         int64_t block_end, uint8_t* packed, float* absmax);
// The 15 midpoints between consecutive NF4 codes, (c[j] + c[j+1]) / 2 in fp32 (torch.bucketize's
// boundaries).
const float* nf4_midpoints();

}  // namespace ferry::kernels::nf4_detail
