// Row-wise int8: bitsandbytes' LLM.int8 weight storage without the outlier decomposition, for a
// frozen base under LoRA (lora.quantize_base int8). A weight (rows, cols) = (out, in) is stored as
//   CB   (rows, cols) int8:  round(w * ((1 / SCB[r]) * 127)), round half to even
//   SCB  (rows)       fp32:  max |w| of the row
// exactly as `bitsandbytes.functional.int8_vectorwise_quant(w)` (0.50.2, threshold 0) computes it:
// the row absmax in fp32, its reciprocal times 127 in fp32 (Python's `127.0 / t` is
// `t.reciprocal() * 127`), the product with the element widened to fp32, rounded. A row of zeros
// has SCB 0 and, here, codes 0 (bnb's 0 * inf is NaN, which torch's int8 cast makes 0 on x86).
// Dequantised as bitsandbytes' CPU training matmul (MatMul8bitFp) does:
//   w = CB[r][c] * (SCB[r] * (1 / 127))   in fp32, rounded once to the output type.
// These are the scalar definitions (plain loops) the tensor-level op (kernels/ops/int8.h) is
// tested against. Torch-free.
#pragma once

#include <cstdint>

#include "kernels/cpu/nf4.h"  // Nf4ValueType: the fp32 / bf16 / fp16 element types

namespace ferry::kernels {

// bnb's 1 / 127 as the fp32 it multiplies with.
inline constexpr float kInt8InverseScale = static_cast<float>(1.0 / 127.0);

// w[rows * cols] of `type` -> cb[rows * cols], scb[rows]. Throws InternalError on null buffers or
// negative sizes.
void int8_rowwise_quantize_reference(const void* w, Nf4ValueType type, int64_t rows, int64_t cols, int8_t* cb,
                                     float* scb);

// cb, scb -> out[rows * cols] of `out_type`.
void int8_rowwise_dequantize_reference(const int8_t* cb, const float* scb, int64_t rows, int64_t cols, void* out,
                                       Nf4ValueType out_type);

}  // namespace ferry::kernels
