// CpuAdamW with 8-bit moments (offload.optimizer_state: int8): the same AdamW step as adamw.h,
// but exp_avg and exp_avg_sq live in host memory as one byte per parameter each plus one fp32
// scale per block of kInt8MomentBlock parameters, as in bitsandbytes' 8-bit Adam. The master
// weights stay fp32. Per parameter the optimizer state shrinks from 12 to 6.03 bytes, and one update
// moves ~16 bytes instead of 28 (fp32 gradient, no weight output).
//
// One pass over memory, block by block: dequantise the block's m and v, run adamw.h's fp32
// arithmetic on each parameter (master and weight_out written at once), keep the block's new fp32 m
// and sqrt(v) in a 2 KB buffer (L1) while tracking their absmaxes, then requantise the block against
// them. The master update uses the new fp32 moments, before requantisation. Threads split the work
// on block boundaries.
//
// Block size 256 (not 2048): a smaller block lets one large gradient cost fewer neighbours their
// relative precision, its scales are only 8 bytes per 256 parameters (0.4% of the traffic), its
// buffers stay 2 KB, and the thread split (multiples of 4096 parameters) stays block-aligned. Newer
// bitsandbytes versions moved their blockwise optimizers from 2048 to 256 too.
//
// The codes are 8-bit mini-floats relative to the block's absmax, rounded to nearest, not linear.
// Adam's step m / sqrt(v) has the same size for large and small gradients, so every element needs
// the same *relative* precision wherever it sits in its block: a linear absmax code gives elements
// 100x below the block's largest no precision at all and rounds their v to 0, so m / (sqrt(v) + eps)
// explodes. A mini-float's relative error is constant over a fixed range of binades, and consecutive
// codes are consecutive fp32 bit patterns, so decoding and encoding are a shift and an add on the
// bit pattern (no table, no gather, no pow), the same integer and float operations in scalar and
// SIMD code, bit for bit. (Power companding, m ~ sqrt and v ~ 4th root, loses precision fast below
// the absmax: in the tests its worst parameter strays 20x further from fp32 AdamW. bitsandbytes'
// dynamic map needs a 256-entry table, a gather in SIMD.)
//   exp_avg:    int8 in [-127, 127], sign and magnitude code c: |m| = v(c) * scale with
//               v(c) = (1 + f/8) * 2^e, 3 mantissa bits over 16 binades, v(127) = 1; so |m| from
//               1.25 * 2^-16 * absmax up has relative error <= 1/16; below half of that, m rounds to
//               0 (a smaller step, never a larger). (Flushing all of code 1's lower half to 0 would
//               save 5% of the SIMD work but tripled the worst parameter's error in the tests.)
//   exp_avg_sq: stored as s = sqrt(v) (what the step divides by, which the step computes anyway),
//               uint8, 255 codes with 4 mantissa bits over 16 binades: s from 1.125 * 2^-16 *
//               absmax (gradients spanning ~5 decades in one block) within 1/32, v within 1/16. A
//               nonzero s never rounds to 0 (below code 1 it is code 1): the denominator can never
//               be much smaller than it should be, so a tiny v cannot blow the step up.
//   dequantised: m = sign * v(c) * scale,  s = v(c) * scale,  v = s * s  (one rounding each).
// The scales are the blocks' exact absmaxes (exp_avg_sq_scale = max sqrt(v) = sqrt(max v)), so the
// largest element of a block is exact, and the codes of every other element follow the block's
// slow common drift (v changes 0.1% per step, far below a code step). Power-of-two scales (the OCP
// MX formats' choice) would make (de)quantisation exact and cheaper, but freeze that drift: in the
// tests the worst parameter strayed 2.5x further from fp32 AdamW. A block whose absmax is below FLT_MIN (whose
// square is 0 in fp32 anyway) is stored as zeros. Exact ties (one value in 2^19) round away from 0.
//
// Exactness: adamw_update_int8_reference is the definition; the AVX2 path reproduces it bit for bit
// (codes, scales, master, weight_out), threaded or not. One int8 step equals
// dequantize_int8_moments -> adamw_update_reference -> quantize_int8_moments, bitwise. A non-finite
// gradient (a step the trainer should skip) poisons the same master weights on every path; NaN signs
// and payloads may differ there (x86 returns whichever of two NaN operands the compiler put first).
// The AVX-512 path does the same at 16 lanes, also bit for bit.
//
// Speed: the codes cost ~40 vector instructions per 8 parameters on top of the fp32 step's 2
// divisions and 1 square root. With AVX-512 (a Zen 5 core) the update runs at ~4.0 G params/s per
// core from cache (2.2 on the AVX2 path), so with 2 threads it reaches 88-100% of its own memory
// stream and 1.46-1.67x the fp32 kernel (which moves 28 bytes per parameter, not 16). On an AVX2-only
// core (~1.25 G params/s per core on Zen 2) it is compute-bound wherever a core has more than
// ~20 GB/s of bandwidth: 0.8-1.1x there. Figures: kernels/cpu/README.md.
//
// Every round-to-nearest 8-bit state shares one limit: an element's v follows its block's absmax,
// plus only the changes large enough to cross a code. The tests bound what that costs against fp32
// AdamW on a problem whose gradient scales span four decades inside every block.
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"

namespace ferry::kernels {

class ThreadPool;

// Parameters per quantisation block (one exp_avg_scale and one exp_avg_sq_scale each).
inline constexpr int64_t kInt8MomentBlock = 256;

// Blocks (so scales of each kind) for n parameters; the last block may be partial.
constexpr int64_t int8_moment_blocks(int64_t n) { return (n + kInt8MomentBlock - 1) / kInt8MomentBlock; }

// Host bytes of the int8 state of n parameters (codes and scales, both moments).
constexpr int64_t int8_moment_bytes(int64_t n) { return 2 * n + 2 * int64_t(sizeof(float)) * int8_moment_blocks(n); }

// The same per parameter for large n: 2 + 8/256 = 2.03125 (the fp32 state's moments take 8).
inline constexpr double kInt8MomentBytesPerParam = 2 + 2.0 * sizeof(float) / kInt8MomentBlock;

// Where one tensor's (or chunk's) 8-bit moments live. Parameter i's codes are exp_avg[i] and
// exp_avg_sq[i]; its scales are exp_avg_scale[i / kInt8MomentBlock] and
// exp_avg_sq_scale[i / kInt8MomentBlock]. A chunk of a larger state must start on a block boundary.
struct Int8Moments {
  int8_t* exp_avg = nullptr;            // (n) codes of m, [-127, 127]
  float* exp_avg_scale = nullptr;       // (int8_moment_blocks(n)) absmax of |m| per block
  uint8_t* exp_avg_sq = nullptr;        // (n) codes of sqrt(v)
  float* exp_avg_sq_scale = nullptr;    // (int8_moment_blocks(n)) absmax of sqrt(v) per block
};

// Sets the state of n parameters to m = v = 0 (what AdamW starts from): zero codes and scales.
void zero_int8_moments(const Int8Moments& moments, int64_t n);

// fp32 moments -> 8-bit state (checkpoint load, tests): the rounding the update uses.
void quantize_int8_moments(const float* exp_avg, const float* exp_avg_sq, const Int8Moments& moments,
                           int64_t n);

// 8-bit state -> fp32 moments (checkpoint save, tests): exactly the values the update starts from.
// quantize_int8_moments of the result gives back the same codes and scales.
void dequantize_int8_moments(const Int8Moments& moments, float* exp_avg, float* exp_avg_sq, int64_t n);

// As adamw_update (same arguments, grad types, grad_scale, weight output, SIMD choice, threads),
// with the moments in `moments`, updated in place.
void adamw_update_int8(const AdamWParams& params, float* master, const Int8Moments& moments,
                       const void* grad, GradType grad_type, float grad_scale, void* weight_out,
                       WeightOutType weight_out_type, int64_t n, ThreadPool* pool = nullptr);

// The definition: a plain scalar loop on the calling thread.
void adamw_update_int8_reference(const AdamWParams& params, float* master, const Int8Moments& moments,
                                 const void* grad, GradType grad_type, float grad_scale,
                                 void* weight_out, WeightOutType weight_out_type, int64_t n);

// One SIMD path on the calling thread (tests; callers with their own threading). Throws
// InternalError if this CPU cannot run `level`.
void adamw_update_int8_at(SimdLevel level, const AdamWParams& params, float* master,
                          const Int8Moments& moments, const void* grad, GradType grad_type,
                          float grad_scale, void* weight_out, WeightOutType weight_out_type,
                          int64_t n);

}  // namespace ferry::kernels
