// NF4: bitsandbytes' 4-bit NormalFloat format for frozen base weights under LoRA (QLoRA), on raw
// host pointers. Quantise, double-quantise the scales, dequantise, bit for bit as
// bitsandbytes 0.50.2 does on the CPU (`bitsandbytes.functional.quantize_4bit(x, quant_type="nf4",
// compress_statistics=...)` / `dequantize_4bit`), so a tensor Ferry quantises equals the one bnb
// would have saved, and a checkpoint bnb saved dequantises to exactly what bnb computes.
//
// Format (a tensor of n elements, flattened row-major, any n):
//   blocks    = ceil(n / blocksize), blocksize 64 by default (32..4096, powers of two)
//   absmax    (blocks) fp32: max |x| of each block (see the partial block below)
//   packed    ((n + 1) / 2) uint8: element 2i in the HIGH nibble of byte i, element 2i+1 in the
//             low one (an odd n pads the last low nibble with code 7, the zero)
//   x[i] ~ nf4_code()[code(i)] * absmax[i / blocksize]
// Double quantisation (bnb's compress_statistics=True) stores the absmax as
//   offset    fp32 = mean(absmax), summed in torch's order (nf4_absmax_offset)
//   qabsmax   (blocks) uint8: absmax - offset quantised blockwise (blocks of 256) with bnb's signed
//             8-bit dynamic code book (nf4_dynamic_code()), through bnb's 65536-entry lookup table
//   absmax2   (ceil(blocks / 256)) fp32: the absmax of each block of (absmax - offset)
//   absmax[i] = dynamic_code[qabsmax[i]] * absmax2[i / 256] + offset   (nf4_unnest_absmax)
//
// The arithmetic, read from bnb's CPU code (backends/default/ops.py quantize_4bit, torch ops in
// fp32; libbitsandbytes_cpu.so quantize_cpu_impl / dequantizeBlockwise4bitCpu, read from its
// disassembly since the wheel ships no source), per block of x widened to fp32:
//   full block:    absmax = max|x|;  s = x * (1 / max(absmax, 1e-38f))          (a reciprocal)
//   partial block: absmax = max(max|x|, 1e-38f);  s = x / absmax                 (a division)
//   code = number of midpoints (c[j] + c[j+1]) / 2 strictly below clamp(s, -1, 1)
//          (torch.bucketize: a value exactly on a midpoint takes the lower code)
//   dequantised = c[code] * absmax in fp32, then rounded to nearest-even to bf16 / fp16
// So a partial last block's stored absmax is never 0 (1e-38f) while a full all-zero block stores 0.
// Non-finite input (bnb's behaviour, which these kernels reproduce): a NaN makes its block's absmax
// NaN and every code of the block 15; an inf makes the absmax inf, the inf itself code 15 (inf * 0
// is NaN, for -inf too) and every finite value of the block code 7. Dequantised, such blocks are NaN
// (the inf itself +inf). A bf16 NaN is written as 0x7fc0, as torch writes it.
//
// nf4_quantize_reference / nf4_dequantize_reference are the definitions (plain loops);
// nf4_quantize / nf4_dequantize split the same per-block work across a ThreadPool, bit-identical
// to them for any thread count (blocks are independent); both run the AVX2 paths (nf4_avx2.cpp)
// where the CPU has them, bit-identical too. The quant-state bookkeeping a loader of bnb
// checkpoints needs is in nf4_state.h.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace ferry::kernels {

class ThreadPool;

// The element type of a full-precision tensor on either side of NF4.
enum class Nf4ValueType { f32, bf16, f16 };

inline constexpr int64_t kNf4DefaultBlocksize = 64;
inline constexpr int64_t kNf4NestedBlocksize = 256;  // bnb quantize_4bit's, for the absmax

// bnb's NF4 code book (get_4bit_type("nf4")): 16 fp32 values, sorted, -1 ... 0 (code 7) ... 1.
const float* nf4_code();
// bnb's signed 8-bit dynamic code book (create_dynamic_map(signed=True)): 256 fp32 values, sorted.
const float* nf4_dynamic_code();

// 32, 64, ..., 4096: what bnb's quantize_4bit accepts.
bool nf4_valid_blocksize(int64_t blocksize);
inline int64_t nf4_blocks(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }
inline int64_t nf4_packed_bytes(int64_t n) { return (n + 1) / 2; }
inline int64_t nf4_value_bytes(Nf4ValueType type) { return type == Nf4ValueType::f32 ? 4 : 2; }

// Quantises x[0, n) of `type`: packed[nf4_packed_bytes(n)], absmax[nf4_blocks(n, blocksize)].
// Throws InternalError on a null buffer, n < 0 or an invalid blocksize.
void nf4_quantize(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize, uint8_t* packed,
                  float* absmax, ThreadPool* pool = nullptr);
void nf4_quantize_reference(const void* x, Nf4ValueType type, int64_t n, int64_t blocksize,
                            uint8_t* packed, float* absmax);
// One SIMD path on the calling thread, for tests (as nf4_dequantize_at below).
void nf4_quantize_at(SimdLevel level, const void* x, Nf4ValueType type, int64_t n, int64_t blocksize,
                     uint8_t* packed, float* absmax);

// Dequantises packed/absmax (plain fp32 absmax; unnest a double-quantised one first) into
// out[0, n) of `out_type`. `pool` == nullptr: default_thread_pool(); small tensors run inline.
void nf4_dequantize(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                    void* out, Nf4ValueType out_type, ThreadPool* pool = nullptr);
void nf4_dequantize_reference(const uint8_t* packed, const float* absmax, int64_t n,
                              int64_t blocksize, void* out, Nf4ValueType out_type);
// One SIMD path (scalar, or AVX2 for avx2 and avx512), on the calling thread, for tests. Throws
// InternalError if this CPU cannot run `level`.
void nf4_dequantize_at(SimdLevel level, const uint8_t* packed, const float* absmax, int64_t n,
                       int64_t blocksize, void* out, Nf4ValueType out_type);

// torch's fp32 summation order for `x.mean()` of a contiguous 1-D fp32 CPU tensor, which is what
// bnb's offset is: ATen's cascade sum (SumKernel.cpp: 4 interleaved accumulators per SIMD lane,
// flushed up 4 levels of partial sums), then one fp32 division by n. `lanes` is the vector width of
// the sum kernel torch runs: 8 (torch 2.11 runs its 8-lane float sum on AVX-512 CPUs too);
// `threads` is torch.get_num_threads() of the process that quantised: above 32768 values ATen sums
// up to that many equal chunks separately, then adds the partial sums, so bnb's offset itself depends
// on the thread count (and the absmax below 32768 blocks, i.e. 2M weights at blocksize 64, does not).
struct TorchSumOrder {
  int lanes = 8;
  int threads = 1;
};
float nf4_absmax_offset(const float* absmax, int64_t blocks, TorchSumOrder order = {});

// Double quantisation (bnb quantize_blockwise(absmax - offset, blocksize=256) on the CPU):
// qabsmax[blocks], absmax2[nf4_blocks(blocks, nested_blocksize)]. `code`: 256 sorted values,
// nullptr for nf4_dynamic_code(). Deterministic, single-threaded (blocks is n / 64).
void nf4_nest_absmax(const float* absmax, int64_t blocks, float offset, uint8_t* qabsmax,
                     float* absmax2, int64_t nested_blocksize = kNf4NestedBlocksize,
                     const float* code = nullptr);
// Its inverse as bnb computes it: absmax[i] = code[qabsmax[i]] * absmax2[i / nested_blocksize] + offset.
void nf4_unnest_absmax(const uint8_t* qabsmax, const float* absmax2, float offset, int64_t blocks,
                       float* absmax, int64_t nested_blocksize = kNf4NestedBlocksize,
                       const float* code = nullptr);

}  // namespace ferry::kernels
