// NF4 range kernels shared by nf4.cpp (the scalar definition, threading) and nf4_avx2.cpp.
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

}  // namespace ferry::kernels::nf4_detail
