// RMSNorm forward as a CUDA kernel on raw device pointers (no torch, no CUDA headers here).
// Matches Hugging Face LlamaRMSNorm: y = w * cast(x * rsqrt(mean(x^2) + eps)), statistics in fp32.
#pragma once

#include <cstdint>

namespace ferry::kernels::cuda {

enum class ElementType { f32, bf16, f16 };

// x, y: rows x cols, row-major; w: cols. `stream` is a cudaStream_t. Throws std::runtime_error
// with the CUDA error string on a launch failure.
void rmsnorm_forward(ElementType type, const void* x, const void* w, void* y, int64_t rows, int64_t cols,
                     float eps, void* stream);

}  // namespace ferry::kernels::cuda
