// Dequantisation of ggml tensor data (the blocks a GGUF file stores) to float32, for every type in
// ggml_types.h. Torch-free: raw block bytes in, floats out.
//
// The definition is gguf-py's `gguf.quants.dequantize` (numpy, float32 arithmetic): every type
// gives the same float32 bits as gguf-py, written in its operation order (fp16 scales widened to
// fp32 first; a K-quant's sub-block scale d * sc formed before it multiplies q; `(d * q) + m` and
// `(d * q) - m` as a product, then a sum). That order turns out not to matter: an fp16 scale has 11
// significant bits and every factor after it is a small integer (sub-block scales and mins of at
// most 8 bits, q of at most 8), so every product is exact in fp32 (24 bits) except Q6_K's
// d * sc * q (up to 11 + 8 + 6 bits; d * sc is exact, so it is rounded once in either order), and
// each element is its formula's exact value rounded once.
// Hence ggml's C reference (dequantize_row_* in ggml-quants.c: the same expressions, e.g. Q6_K's
// `d * sc[is] * q1`, Q4_1's `x0*d + m`, even contracted into an FMA) gives the same bits too; the
// parity test checks Ferry against gguf-py for every type.
//
// The loops are plain C++ the compiler vectorises; the torch wrapper that threads them over a
// tensor's rows and converts to bf16/fp16 is ggml_dequantize_tensor.h.
#pragma once

#include <cstdint>

#include "src/io/ggml_types.h"

namespace ferry::io {

// Dequantises `elements` values of `type` (a whole number of blocks: FERRY_CHECK otherwise) from
// `blocks` (ggml_nbytes(type, elements) bytes, any alignment) into `out`.
void dequantize_row(GgmlType type, const void* blocks, int64_t elements, float* out);

}  // namespace ferry::io
