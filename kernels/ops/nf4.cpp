// NF4 on tensors: the CPU kernels or the CUDA dequantise behind one call (see nf4.h).
#include "kernels/ops/nf4.h"

#include <ATen/ATen.h>

#include <mutex>

#include "kernels/cpu/nf4.h"
#include "core/error.h"

#ifdef FERRY_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/nf4_dequant.h"
#endif

namespace ferry::kernels {
namespace {

Nf4ValueType value_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return Nf4ValueType::f32;
    case at::kBFloat16: return Nf4ValueType::bf16;
    case at::kHalf: return Nf4ValueType::f16;
    default:
      throw InternalError(detail::concat("NF4: unsupported dtype ", c10::toString(dtype), " (fp32, bf16 or fp16)"));
  }
}

#ifdef FERRY_WITH_CUDA
cuda::ElementType cuda_element_type(at::ScalarType dtype) {
  switch (value_type(dtype)) {  // rejects other dtypes
    case Nf4ValueType::bf16: return cuda::ElementType::bf16;
    case Nf4ValueType::f16: return cuda::ElementType::f16;
    default: return cuda::ElementType::f32;
  }
}

// bnb's dynamic code book on `device`, uploaded once per device.
const at::Tensor& dynamic_code_on(c10::Device device) {
  static std::mutex mutex;
  static std::vector<at::Tensor> tables(64);
  std::lock_guard<std::mutex> lock(mutex);
  at::Tensor& table = tables.at(static_cast<size_t>(device.index()));
  if (!table.defined()) {
    table = at::from_blob(const_cast<float*>(nf4_dynamic_code()), {256}, at::kFloat).to(device);
  }
  return table;
}
#endif

}  // namespace

int64_t Nf4Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Nf4Tensor::bytes() const {
  int64_t total = packed.numel() + absmax.numel() * absmax.element_size();
  if (nested()) total += nested_absmax.numel() * 4;
  return total;
}

Nf4Tensor nf4_quantize_tensor(const at::Tensor& x, bool double_quant, int64_t blocksize) {
  FERRY_CHECK(x.defined(), "nf4_quantize_tensor: undefined tensor");
  FERRY_CHECK(nf4_valid_blocksize(blocksize), "nf4_quantize_tensor: invalid blocksize ", blocksize);
  const at::Tensor host = x.device().is_cpu() ? x.contiguous() : x.to(at::kCPU).contiguous();
  Nf4Tensor q;
  q.shape = host.sizes().vec();
  q.blocksize = blocksize;
  q.dtype = host.scalar_type();
  const int64_t n = host.numel(), blocks = nf4_blocks(n, blocksize);
  q.packed = at::empty({nf4_packed_bytes(n)}, at::kByte);
  at::Tensor absmax = at::empty({blocks}, at::kFloat);
  nf4_quantize(host.data_ptr(), value_type(q.dtype), n, blocksize, q.packed.data_ptr<uint8_t>(),
               absmax.data_ptr<float>());
  if (!double_quant) {
    q.absmax = absmax;
    return q;
  }
  // bnb's offset is torch's `absmax.mean()`: this process's libtorch computes it the same way (its
  // summation order depends on the CPU capability and thread count; nf4_absmax_offset is the
  // torch-free model of it).
  q.nested_offset = absmax.mean().item<float>();
  q.absmax = at::empty({blocks}, at::kByte);
  q.nested_absmax = at::empty({nf4_blocks(blocks, kNf4NestedBlocksize)}, at::kFloat);
  nf4_nest_absmax(absmax.data_ptr<float>(), blocks, q.nested_offset, q.absmax.data_ptr<uint8_t>(),
                  q.nested_absmax.data_ptr<float>());
  return q;
}

at::Tensor nf4_block_absmax(const Nf4Tensor& q) {
  if (!q.nested()) return q.absmax;
  const int64_t blocks = q.absmax.numel();
  at::Tensor absmax = at::empty({blocks}, q.absmax.options().dtype(at::kFloat));
  if (q.absmax.is_cpu()) {
    nf4_unnest_absmax(q.absmax.data_ptr<uint8_t>(), q.nested_absmax.data_ptr<float>(), q.nested_offset, blocks,
                      absmax.data_ptr<float>());
    return absmax;
  }
#ifdef FERRY_WITH_CUDA
  const c10::Device device = q.absmax.device();
  cuda::nf4_unnest_absmax(q.absmax.data_ptr<uint8_t>(), q.nested_absmax.data_ptr<float>(), q.nested_offset, blocks,
                          kNf4NestedBlocksize, dynamic_code_on(device).data_ptr<float>(), absmax.data_ptr<float>(),
                          c10::cuda::getCurrentCUDAStream(device.index()).stream());
  return absmax;
#else
  throw InternalError("NF4: a non-CPU tensor in a build without CUDA kernels");
#endif
}

at::Tensor nf4_dequantize_tensor(const Nf4Tensor& q, at::ScalarType dtype) {
  const at::Tensor absmax = nf4_block_absmax(q);
  at::Tensor out = at::empty(q.shape, q.packed.options().dtype(dtype));
  const int64_t n = q.numel();
  if (q.packed.is_cpu()) {
    nf4_dequantize(q.packed.data_ptr<uint8_t>(), absmax.data_ptr<float>(), n, q.blocksize, out.data_ptr(),
                   value_type(dtype));
    return out;
  }
#ifdef FERRY_WITH_CUDA
  cuda::nf4_dequantize(q.packed.data_ptr<uint8_t>(), absmax.data_ptr<float>(), n, q.blocksize,
                       cuda_element_type(dtype), out.data_ptr(),
                       c10::cuda::getCurrentCUDAStream(q.packed.device().index()).stream());
  return out;
#else
  throw InternalError("NF4: a non-CPU tensor in a build without CUDA kernels");
#endif
}

Nf4Tensor nf4_to_device(const Nf4Tensor& q, c10::Device device) {
  Nf4Tensor out = q;
  out.packed = q.packed.to(device);
  out.absmax = q.absmax.to(device);
  if (q.nested()) out.nested_absmax = q.nested_absmax.to(device);
  return out;
}

}  // namespace ferry::kernels
