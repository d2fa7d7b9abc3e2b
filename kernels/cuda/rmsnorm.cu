// RMSNorm forward kernel: one block per row, fp32 accumulation, block-wide reduction.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/rmsnorm.h"

namespace ferry::kernels::cuda {
namespace {

template <class T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half from_float(float v) { return __float2half(v); }

constexpr int kThreads = 256;

template <class T>
__global__ void rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t cols,
                               float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_float(xr[c]);
    sum += v * v;
  }
  // Warp reduction, then one value per warp through shared memory.
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float inv_rms;
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    float s = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.f;
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (threadIdx.x == 0) inv_rms = rsqrtf(s / static_cast<float>(cols) + eps);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    // As transformers: normalise in fp32, cast to the input type, then scale by the weight.
    const T normed = from_float<T>(to_float(xr[c]) * inv_rms);
    yr[c] = from_float<T>(to_float(w[c]) * to_float(normed));
  }
}

template <class T>
void launch(const void* x, const void* w, void* y, int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  rmsnorm_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), cols, eps);
}

}  // namespace

void rmsnorm_forward(ElementType type, const void* x, const void* w, void* y, int64_t rows, int64_t cols, float eps,
                     void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case ElementType::f32: launch<float>(x, w, y, rows, cols, eps, s); break;
    case ElementType::bf16: launch<__nv_bfloat16>(x, w, y, rows, cols, eps, s); break;
    case ElementType::f16: launch<__half>(x, w, y, rows, cols, eps, s); break;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("rmsnorm kernel launch failed: ") + cudaGetErrorString(err));
}

}  // namespace ferry::kernels::cuda
