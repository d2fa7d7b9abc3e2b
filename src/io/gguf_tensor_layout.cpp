// llama.cpp's names, row order and types for a Hugging Face model's weights (see gguf_tensor_layout.h).
#include "src/io/gguf_tensor_layout.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "src/io/ggml_quantize.h"
#include "src/model/family/model_family.h"
#include "src/model/family/model_tensors.h"

namespace ferry::io {
namespace {

constexpr struct {
  GgufFileType type;
  const char* name;
  uint32_t llama_ftype;  // llama.h's enum llama_ftype
} kFileTypes[] = {
    {GgufFileType::f32, "f32", 0},         {GgufFileType::f16, "f16", 1},
    {GgufFileType::bf16, "bf16", 32},      {GgufFileType::q8_0, "q8_0", 7},
    {GgufFileType::q4_0, "q4_0", 2},       {GgufFileType::q5_0, "q5_0", 8},
    {GgufFileType::q4_k_s, "q4_k_s", 14},  {GgufFileType::q4_k_m, "q4_k_m", 15},
    {GgufFileType::q5_k_m, "q5_k_m", 17},  {GgufFileType::q6_k, "q6_k", 18},
};

}  // namespace

GgufFileType parse_gguf_file_type(const std::string& name) {
  std::string names;
  for (const auto& entry : kFileTypes) {
    if (name == entry.name) return entry.type;
    names += (names.empty() ? "" : ", ") + std::string(entry.name);
  }
  throw UserError("--gguf-type must be one of " + names + ", got '" + name + "'");
}

std::string gguf_file_type_name(GgufFileType type) {
  for (const auto& entry : kFileTypes) {
    if (entry.type == type) return entry.name;
  }
  return "?";
}

bool is_llama_quantize_type(GgufFileType type) {
  return type != GgufFileType::f32 && type != GgufFileType::f16 && type != GgufFileType::bf16 &&
         type != GgufFileType::q8_0;
}

uint32_t gguf_file_type_id(GgufFileType type) {
  for (const auto& entry : kFileTypes) {
    if (entry.type == type) return entry.llama_ftype;
  }
  return 0;
}

GgmlType gguf_tensor_type(GgufFileType file_type, const std::vector<int64_t>& shape) {
  FERRY_CHECK(!is_llama_quantize_type(file_type), "gguf_tensor_type: ", gguf_file_type_name(file_type),
              " is chosen per tensor (gguf_quant_mix_types)");
  if (file_type == GgufFileType::f32 || shape.size() < 2) return GgmlType::f32;
  switch (file_type) {
    case GgufFileType::f16: return GgmlType::f16;
    case GgufFileType::bf16: return GgmlType::bf16;
    case GgufFileType::q8_0: return shape.back() % kQ8_0BlockSize == 0 ? GgmlType::q8_0 : GgmlType::f16;
    default: break;
  }
  return GgmlType::f32;
}

bool gguf_router_tensor(const std::string& gguf_name) {
  return gguf_name.ends_with(".ffn_gate_inp.weight") || gguf_name.ends_with(".ffn_gate_inp_shexp.weight");
}

GgmlType gguf_tensor_type(GgufFileType file_type, const std::string& gguf_name, const std::vector<int64_t>& shape) {
  if (!is_llama_quantize_type(file_type) && gguf_router_tensor(gguf_name)) return GgmlType::f32;
  return gguf_tensor_type(file_type, shape);
}

std::vector<int64_t> GgufTensorLayout::file_shape() const {
  if (expert < 0) return shape;
  std::vector<int64_t> out{experts};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

std::vector<GgufTensorLayout> gguf_tensor_layouts(const ModelShape& c) {
  const bool permute = family_of(c).gguf_permutes_qk;
  std::vector<GgufTensorLayout> out;
  for (ModelTensor& tensor : model_tensors(c)) {
    GgufTensorLayout layout{tensor.gguf_name, tensor.name, std::move(tensor.shape)};
    layout.offset = tensor.gguf_offset;
    if (tensor.expert >= 0) {
      layout.expert = tensor.expert;
      layout.experts = c.moe.num_experts;
    }
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
