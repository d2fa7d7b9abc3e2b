// Packed ggml weights (see ggml_tensor.h).
#include "src/io/ggml_tensor.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "src/io/ggml_dequantize_tensor.h"

namespace ferry::io {

int64_t GgmlTensor::numel() const { return shape.size() == 2 ? shape[0] * shape[1] : 0; }

int64_t GgmlTensor::bytes() const { return blocks.defined() ? static_cast<int64_t>(blocks.nbytes()) : 0; }

GgmlTensor ggml_tensor_from_blocks(const at::Tensor& blocks, GgmlType type, const std::string& what) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  if (blocks.scalar_type() != at::kByte || blocks.dim() != 2 || blocks.size(1) % traits.block_bytes != 0) {
    throw InputError(detail::concat(what, ": packed ", traits.name, " blocks stored as ",
                                    c10::toString(blocks.scalar_type()), " ", blocks.sizes(),
                                    "; expected uint8 (rows, a whole number of ", traits.block_bytes,
                                    "-byte blocks per row)"));
  }
  GgmlTensor q;
  q.blocks = blocks;
  q.type = type;
  q.shape = {blocks.size(0), blocks.size(1) / traits.block_bytes * traits.block_elements};
  return q;
}

at::Tensor ggml_dequantize(const GgmlTensor& q, at::ScalarType dtype) {
  FERRY_CHECK(q.blocks.defined() && q.shape.size() == 2, "ggml_dequantize: no blocks");
  const at::Tensor host = q.blocks.device().is_cpu() ? q.blocks.contiguous() : q.blocks.to(at::kCPU).contiguous();
  FERRY_CHECK(static_cast<uint64_t>(host.nbytes()) == ggml_nbytes(q.type, q.numel()), "ggml_dequantize: ",
              host.nbytes(), " bytes of blocks for ", ggml_type_name(q.type), " ", q.shape[0], " x ", q.shape[1]);
  at::Tensor w = dequantize_tensor(q.type, host.data_ptr<uint8_t>(), q.shape, dtype);  // (rows, cols)
  return q.blocks.device().is_cpu() ? w : w.to(q.blocks.device());
}

GgmlTensor ggml_to_device(const GgmlTensor& q, c10::Device device) {
  GgmlTensor out = q;
  if (out.blocks.defined() && out.blocks.device() != device) out.blocks = out.blocks.to(device);
  return out;
}

}  // namespace ferry::io
