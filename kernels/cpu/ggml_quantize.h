// ggml's block quantisers on raw host pointers, bit for bit llama.cpp's reference ones
// (ggml/src/ggml-quants.c, llama.cpp as vendored by llama-cpp-python 0.3.36): the functions
// `llama-quantize` runs when it has no importance matrix, so a GGUF file Ferry writes in these types
// holds the bytes llama.cpp would have written from the same float32 weights.
//
//   type   block  bytes  llama.cpp function (what it does per block)
//   Q4_0     32    18    quantize_row_q4_0_ref: d = max / -8 (max: the value of largest |x|),
//                        q = min(15, (int8)(x / d + 8.5))
//   Q5_0     32    22    quantize_row_q5_0_ref: d = max / -16, q = min(31, (int8)(x / d + 16.5))
//   Q5_1     32    24    quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = (uint8)((x - min) / d + 0.5)
//   Q8_0     32    34    quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d)
//   Q4_K    256   144    quantize_row_q4_K_ref: 8 sub-blocks of 32, each fitted by make_qkx2_quants
//                        (nmax 15, weights sqrt(mean x^2) + |x|, rmin -1, rdelta 0.1, 20 steps) to a
//                        scale and min; those quantised to 6 bits against the block's largest
//                        (fp16 d, dmin); then q = nearest((x + dmin * m) / (d * sc)) in 0..15
//   Q5_K    256   176    quantize_row_q5_K_ref: as Q4_K with nmax 31, rmin -0.5, 15 steps
//   Q6_K    256   210    quantize_row_q6_K_ref: 16 sub-blocks of 16, each by make_qx_quants (nmax 32,
//                        rmse_type 1: weights x^2, 18 scale trials), scales as int8 against the
//                        block's largest (fp16 d), then q = nearest(x / (d * sc)) in -32..31
//
// Byte layouts are ggml-common.h's (and src/io/ggml_types.h's). Every float operation is the C
// code's, in its order, one rounding each (no fused multiply-adds: these files are compiled with
// -ffp-contract=off), and fp16 conversion is ggml's own (round to nearest even; NaN -> 0x7e00),
// `nearest` its nearest_int (x + 1.5 * 2^23: round half to even, exact for |x| < 2^22).
// Blocks are independent, so any split of a tensor's blocks over threads gives the same bytes.
//
// ggml_quantize_reference is the definition: a plain loop over blocks, a line-by-line translation
// of the C. ggml_quantize runs the fastest path this CPU has (for the K types AVX-512 or AVX2:
// sixteen or eight sub-blocks side by side, one per lane, each lane doing its sub-block's
// arithmetic in the C code's order, so it equals the definition bit for bit) on a ThreadPool.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace ferry::kernels {

class ThreadPool;

enum class GgmlQuantType { q4_0, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k };

struct GgmlQuantBlock {
  int64_t elements;  // values per block
  int64_t bytes;     // bytes per block
};

GgmlQuantBlock ggml_quant_block(GgmlQuantType type);
const char* ggml_quant_type_name(GgmlQuantType type);  // "Q4_K"

// Quantises x[0, n) (n a multiple of the type's block: InternalError otherwise) into
// n / elements * bytes bytes at `out`. `pool` == nullptr: default_thread_pool(); small inputs run
// on the calling thread.
void ggml_quantize(GgmlQuantType type, const float* x, int64_t n, uint8_t* out, ThreadPool* pool = nullptr);
// The definition, on the calling thread.
void ggml_quantize_reference(GgmlQuantType type, const float* x, int64_t n, uint8_t* out);
// One SIMD path on the calling thread, for tests and benchmarks (InternalError where this CPU cannot
// run `level`). Types without a path of that level run the definition.
void ggml_quantize_at(SimdLevel level, GgmlQuantType type, const float* x, int64_t n, uint8_t* out);

}  // namespace ferry::kernels
