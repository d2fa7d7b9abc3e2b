// NF4 dequantisation on the GPU (QLoRA's frozen base: dequantise a layer's weight just before its
// GEMM), on raw device pointers: no torch, no CUDA headers here. Bit for bit the CPU definition
// (kernels/cpu/nf4.h, nf4_dequantize_reference / nf4_unnest_absmax), which equals bitsandbytes:
// out[i] = code[nibble(i)] * absmax[i / blocksize] in fp32 (element 2i in the high nibble of byte i),
// rounded to nearest-even to bf16 / fp16 with the CPU's NaN encodings; products and sums round
// separately (no FMA contraction). Without FERRY_WITH_CUDA the CPU kernels are the path.
#pragma once

#include <cstdint>

#include "kernels/cuda/rmsnorm.h"  // ElementType

namespace ferry::kernels::cuda {

// packed: (n + 1) / 2 bytes, absmax: ceil(n / blocksize) fp32, out: n elements of `type`, all on
// the device; blocksize even. `stream` is a cudaStream_t (nullptr: the legacy default stream).
// Throws std::runtime_error with the CUDA error string on a launch failure.
void nf4_dequantize(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                    ElementType type, void* out, void* stream);

// Double-quantised absmax back to fp32 on the device:
// absmax[i] = code[qabsmax[i]] * absmax2[i / nested_blocksize] + offset; code: 256 fp32 on the device.
void nf4_unnest_absmax(const uint8_t* qabsmax, const float* absmax2, float offset, int64_t blocks,
                       int64_t nested_blocksize, const float* code, float* absmax, void* stream);

}  // namespace ferry::kernels::cuda
