// llama.cpp's names, row order and types for a Hugging Face model's weights (see gguf_tensor_layout.h).
#include "src/io/gguf_tensor_layout.h"

#include <ATen/ATen.h>

#include <map>

#include "core/error.h"
#include "src/io/ggml_quantize.h"
#include "src/io/hf_tensor_specs.h"

namespace ferry::io {
namespace {

// llama.cpp's name for a Hugging Face weight name (without "model.layers.<i>." in a layer).
std::string gguf_tensor_name(const HfTensorSpec& spec) {
  static const std::map<std::string, std::string> global = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                            {"model.norm.weight", "output_norm.weight"},
                                                            {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> module = {
      {"input_layernorm", "attn_norm"}, {"self_attn.q_proj", "attn_q"},   {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},   {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
      {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},        {"mlp.down_proj", "ffn_down"}};
  if (spec.layer < 0) return global.at(spec.name);
  const size_t dot = spec.suffix.rfind('.');  // "...q_proj" + ".weight" / ".bias"
  return "blk." + std::to_string(spec.layer) + "." + module.at(spec.suffix.substr(0, dot)) + spec.suffix.substr(dot);
}

}  // namespace

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

std::vector<GgufTensorLayout> gguf_tensor_layouts(const LlamaConfig& c, const std::string& arch) {
  const bool permute = arch == "llama";
  std::vector<GgufTensorLayout> out;
  for (HfTensorSpec& spec : hf_tensor_specs(c)) {
    GgufTensorLayout layout{gguf_tensor_name(spec), spec.name, std::move(spec.shape)};
    if (permute && spec.suffix.rfind("self_attn.q_proj.", 0) == 0) {
      layout.permutation = GgufRowPermutation::query;
      layout.groups = c.num_attention_heads;
    }
    if (permute && spec.suffix.rfind("self_attn.k_proj.", 0) == 0) {
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
