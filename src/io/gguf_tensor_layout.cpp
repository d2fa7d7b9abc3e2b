// llama.cpp's names, row order and types for a Hugging Face model's weights (see gguf_tensor_layout.h).
#include "src/io/gguf_tensor_layout.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "src/io/ggml_quantize.h"
#include "src/model/family/model_family.h"
#include "src/model/family/model_tensors.h"

namespace ferry::io {
GgufFileType parse_gguf_file_type(const std::string& name) {
  if (name == "f32") return GgufFileType::f32;
  if (name == "f16") return GgufFileType::f16;
  if (name == "bf16") return GgufFileType::bf16;
  if (name == "q8_0") return GgufFileType::q8_0;
  throw UserError("--gguf-type must be f32, f16, bf16 or q8_0, got '" + name + "'");
}

uint32_t gguf_file_type_id(GgufFileType type) {
  switch (type) {
    case GgufFileType::f32: return 0;
    case GgufFileType::f16: return 1;
    case GgufFileType::q8_0: return 7;
    case GgufFileType::bf16: return 32;
  }
  return 0;
}

GgmlType gguf_tensor_type(GgufFileType file_type, const std::vector<int64_t>& shape) {
  if (file_type == GgufFileType::f32 || shape.size() < 2) return GgmlType::f32;
  switch (file_type) {
    case GgufFileType::f16: return GgmlType::f16;
    case GgufFileType::bf16: return GgmlType::bf16;
    case GgufFileType::q8_0: return shape.back() % kQ8_0BlockSize == 0 ? GgmlType::q8_0 : GgmlType::f16;
    case GgufFileType::f32: break;
  }
  return GgmlType::f32;
}

std::vector<GgufTensorLayout> gguf_tensor_layouts(const ModelShape& c) {
  const bool permute = family_of(c).gguf_permutes_qk;
  std::vector<GgufTensorLayout> out;
  for (ModelTensor& tensor : model_tensors(c)) {
    GgufTensorLayout layout{tensor.gguf_name, tensor.name, std::move(tensor.shape)};
    layout.offset = tensor.gguf_offset;
    if (permute && tensor.suffix.rfind("self_attn.q_proj.", 0) == 0) {
      layout.permutation = GgufRowPermutation::query;
      layout.groups = c.num_attention_heads;
    }
    if (permute && tensor.suffix.rfind("self_attn.k_proj.", 0) == 0) {
      layout.permutation = GgufRowPermutation::key;
      layout.groups = c.num_key_value_heads;
    }
    out.push_back(std::move(layout));
  }
  return out;
}

at::Tensor permute_gguf_rows(const at::Tensor& w, int64_t groups) {
  const std::vector<int64_t> sizes = w.sizes().vec();
  std::vector<int64_t> split{groups, 2, w.size(0) / groups / 2};
  split.insert(split.end(), sizes.begin() + 1, sizes.end());
  return w.reshape(split).transpose(1, 2).reshape(sizes).contiguous();
}

at::Tensor unpermute_gguf_rows(const at::Tensor& w, int64_t groups) {
  const std::vector<int64_t> sizes = w.sizes().vec();
  std::vector<int64_t> split{groups, w.size(0) / groups / 2, 2};
  split.insert(split.end(), sizes.begin() + 1, sizes.end());
  return w.reshape(split).transpose(1, 2).reshape(sizes).contiguous();
}

}  // namespace ferry::io
