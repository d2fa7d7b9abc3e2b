// CpuAdamW on bf16 master weights with a Kahan compensation buffer (offload.master_weights:
// bf16_kahan): instead of an fp32 master copy (4 bytes per parameter) beside the bf16 weights the
// GPU gets (2 bytes), the host keeps the bf16 weights themselves plus a bf16 compensation c that
// holds what rounding the master to bf16 lost. The pair carries ~16 significant bits, so updates far
// below a bf16 ulp (lr 1e-5 on weights near 1) still accumulate instead of rounding away. Host bytes
// per trainable parameter for weights + master drop from 6 to 4.
//
// One step, per tile of kKahanTile parameters held in L1:
//   master = f32(w) + f32(c)                         (decode; exact: |c| <= ulp(w) / 2)
//   AdamW on master, exp_avg, exp_avg_sq             (adamw.h's fp32 step, or adamw_int8.h's)
//   w = rne_bf16(master),  c = rne_bf16(master - f32(w))   (encode; master - f32(w) is exact)
// The bf16 w written back is what the GPU receives: there is no separate weight output.
// adamw_update_kahan_reference is that definition with the reference AdamW loops; the threaded
// paths reproduce it bit for bit (AdamW's SIMD paths are bit-identical to its reference).
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"

namespace ferry::kernels {

class ThreadPool;

// Parameters per decode/update/encode tile: a multiple of kInt8MomentBlock.
inline constexpr int64_t kKahanTile = 2048;

// master[i] = f32(weight[i]) + f32(compensation[i]) (bf16 bit patterns in, fp32 out).
void decode_kahan_master(const uint16_t* weight, const uint16_t* compensation, float* master, int64_t n);
// weight[i] = rne_bf16(master[i]); compensation[i] = rne_bf16(master[i] - f32(weight[i])).
void encode_kahan_master(const float* master, uint16_t* weight, uint16_t* compensation, int64_t n);

// One AdamW step of n parameters whose master is the pair (weight, compensation), fp32 moments.
void adamw_update_kahan(const AdamWParams& params, uint16_t* weight, uint16_t* compensation, float* exp_avg,
                        float* exp_avg_sq, const void* grad, GradType grad_type, float grad_scale, int64_t n,
                        ThreadPool* pool = nullptr);
// The same with 8-bit moments (adamw_int8.h).
void adamw_update_kahan_int8(const AdamWParams& params, uint16_t* weight, uint16_t* compensation,
                             const Int8Moments& moments, const void* grad, GradType grad_type, float grad_scale,
                             int64_t n, ThreadPool* pool = nullptr);

// The definition, on the calling thread: decode all n, adamw_update_reference (or
// adamw_update_int8_reference when `moments` is given), encode. Exactly one of exp_avg/exp_avg_sq
// and moments is used.
void adamw_update_kahan_reference(const AdamWParams& params, uint16_t* weight, uint16_t* compensation,
                                  float* exp_avg, float* exp_avg_sq, const Int8Moments* moments, const void* grad,
                                  GradType grad_type, float grad_scale, int64_t n);

}  // namespace ferry::kernels
