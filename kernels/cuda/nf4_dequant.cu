// NF4 dequantisation kernels: one thread per packed byte (two outputs), grid-stride.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cpu/nf4_code_book.h"
#include "kernels/cuda/nf4_dequant.h"

namespace ferry::kernels::cuda {
namespace {

// bnb's NF4 code book, in constant memory.
__constant__ float kNf4Code[16] = {FERRY_NF4_CODE_BOOK};

// The conversions of kernels/cpu/half_convert.h, in the same integer arithmetic, so NaN, subnormal
// and overflow cases round identically (CUDA's __float2bfloat16 encodes NaN as 0x7fff).
__device__ __forceinline__ uint16_t to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ uint16_t to_fp16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    const float rounded = __fadd_rn(__uint_as_float(magnitude), 0.5f);
    return uint16_t(sign | (__float_as_uint(rounded) - 0x3f000000u));
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  return uint16_t(sign | ((magnitude - (112u << 23) + 0xfffu + odd) >> 13));
}

template <ElementType kType>
__device__ __forceinline__ void store(void* out, int64_t i, float v) {
  if constexpr (kType == ElementType::f32) static_cast<float*>(out)[i] = v;
  else if constexpr (kType == ElementType::bf16) static_cast<uint16_t*>(out)[i] = to_bf16(v);
  else static_cast<uint16_t*>(out)[i] = to_fp16(v);
}

template <ElementType kType>
__global__ void nf4_dequantize_kernel(const uint8_t* __restrict__ packed, const float* __restrict__ absmax,
                                      int64_t n, int64_t blocksize, void* __restrict__ out) {
  const int64_t bytes = (n + 1) / 2;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < bytes; b += int64_t(gridDim.x) * blockDim.x) {
    const uint8_t byte = packed[b];
    const int64_t i = 2 * b;
    const float scale = absmax[i / blocksize];  // blocksize is even: i and i + 1 share a block
    store<kType>(out, i, __fmul_rn(kNf4Code[byte >> 4], scale));
    if (i + 1 < n) store<kType>(out, i + 1, __fmul_rn(kNf4Code[byte & 0xf], scale));
  }
}

__global__ void nf4_unnest_kernel(const uint8_t* __restrict__ qabsmax, const float* __restrict__ absmax2,
                                  float offset, int64_t blocks, int64_t nested_blocksize,
                                  const float* __restrict__ code, float* __restrict__ absmax) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < blocks; i += int64_t(gridDim.x) * blockDim.x) {
    absmax[i] = __fadd_rn(__fmul_rn(code[qabsmax[i]], absmax2[i / nested_blocksize]), offset);
  }
}

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 65535;

unsigned grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + " kernel launch failed: " + cudaGetErrorString(err));
}

}  // namespace

void nf4_dequantize(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize, ElementType type,
                    void* out, void* stream) {
  if (n <= 0) return;
  if (blocksize <= 0 || blocksize % 2) throw std::runtime_error("nf4_dequantize: blocksize must be even and positive");
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = grid_for((n + 1) / 2);
  switch (type) {
    case ElementType::f32:
      nf4_dequantize_kernel<ElementType::f32><<<grid, kThreads, 0, s>>>(packed, absmax, n, blocksize, out);
      break;
    case ElementType::bf16:
      nf4_dequantize_kernel<ElementType::bf16><<<grid, kThreads, 0, s>>>(packed, absmax, n, blocksize, out);
      break;
    case ElementType::f16:
      nf4_dequantize_kernel<ElementType::f16><<<grid, kThreads, 0, s>>>(packed, absmax, n, blocksize, out);
      break;
  }
  check_launch("nf4_dequantize");
}

void nf4_unnest_absmax(const uint8_t* qabsmax, const float* absmax2, float offset, int64_t blocks,
                       int64_t nested_blocksize, const float* code, float* absmax, void* stream) {
  if (blocks <= 0) return;
  if (nested_blocksize <= 0) throw std::runtime_error("nf4_unnest_absmax: nested_blocksize must be positive");
  nf4_unnest_kernel<<<grid_for(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      qabsmax, absmax2, offset, blocks, nested_blocksize, code, absmax);
  check_launch("nf4_unnest_absmax");
}

}  // namespace ferry::kernels::cuda
