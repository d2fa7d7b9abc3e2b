// How llama.cpp lays out a Hugging Face model's weights in GGUF, shared by the model
// export (gguf_export.h), the LoRA adapter export (gguf_adapter_export.h) and reading a GGUF model
// (gguf_model.h, which undoes the permutation):
//
//   names         each tensor's gguf_name in the family's tensor list (src/model/family/model_tensors.h):
//                 model.embed_tokens -> token_embd, model.norm -> output_norm, lm_head -> output
//                 (absent with tied embeddings), model.layers.N.self_attn.q_proj -> blk.N.attn_q, ...
//   offset        Gemma's norm weights are stored + 1 (the converter's norm_shift): offset 1
//   permutation   the families whose description says so (llama, mistral; convert_hf_to_gguf.py's
//                 DecoderModel.permute): the rows of q_proj (n_head
//                 groups) and k_proj (n_kv_head groups) and their biases go from Hugging Face's
//                 rotate-half order to llama.cpp's interleaved pairs: reshape(groups, 2, head_dim/2, ...)
//                 -> swap axes 1, 2. other families are written as they are (NEOX rope).
//   types         --gguf-type f32: everything F32. f16 / bf16: matrices F16 / BF16, 1-D tensors F32.
//                 q8_0: matrices Q8_0, except a matrix whose rows are not a multiple of 32 values,
//                 which is F16 (the converter's fallback); 1-D F32. These four are the types of
//                 convert_hf_to_gguf.py --outtype. q4_0, q5_0, q4_k_s, q4_k_m, q5_k_m, q6_k are
//                 llama-quantize's: each tensor's type as llama.cpp chooses it (gguf_quant_mix.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/model_shape.h"
#include "src/io/ggml_types.h"

namespace ferry::io {

// --gguf-type: the type of the matrices (f32 ... q8_0), or the llama-quantize mix (q4_0 ... q6_k).
enum class GgufFileType { f32, f16, bf16, q8_0, q4_0, q5_0, q4_k_s, q4_k_m, q5_k_m, q6_k };

// "f32" -> GgufFileType::f32, "q4_k_m" -> GgufFileType::q4_k_m, ...; UserError for anything else.
GgufFileType parse_gguf_file_type(const std::string& name);
// "f32", ..., "q4_k_m": the --gguf-type value.
std::string gguf_file_type_name(GgufFileType type);

// True for the types llama-quantize makes (q4_0 ... q6_k), whose per-tensor types come from
// gguf_quant_mix.h; false for the converter's (f32, f16, bf16, q8_0).
bool is_llama_quantize_type(GgufFileType type);

// llama_ftype for general.file_type: 0 (f32), 1 (f16), 32 (bf16), 7 (q8_0), 2 (q4_0), 8 (q5_0),
// 14 (q4_k_s), 15 (q4_k_m), 17 (q5_k_m), 18 (q6_k).
uint32_t gguf_file_type_id(GgufFileType type);

// The ggml type a tensor of `shape` (torch order) is stored in (see "types" above), for the
// converter's types; InternalError for a llama-quantize type (its choice needs the tensor's name
// and the model: gguf_quant_mix.h).
GgmlType gguf_tensor_type(GgufFileType file_type, const std::vector<int64_t>& shape);

enum class GgufRowPermutation { none, query, key };

// One Hugging Face weight as llama.cpp names and lays it out.
struct GgufTensorLayout {
  std::string gguf_name;   // "blk.0.attn_q.weight"
  std::string hf_name;     // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  GgufRowPermutation permutation = GgufRowPermutation::none;
  int64_t groups = 0;      // row groups of the permutation: n_head (query) or n_kv_head (key)
  double offset = 0;       // stored = Hugging Face weight + offset (Gemma's norms: 1)
};

// The weights `config` needs (its family's tensor list) under llama.cpp's names, in the file's
// order: token_embd, blk.0.*, blk.1.*, ..., output_norm, output.
std::vector<GgufTensorLayout> gguf_tensor_layouts(const ModelShape& config);

// Hugging Face's rotate-half row order -> llama.cpp's interleaved pairs, per group of rows
// (DecoderModel.permute); `w` is (rows, ...) or a bias (rows). Returns a contiguous tensor.
at::Tensor permute_gguf_rows(const at::Tensor& w, int64_t groups);
// The inverse: llama.cpp's interleaved pairs -> Hugging Face's rotate-half rows.
at::Tensor unpermute_gguf_rows(const at::Tensor& w, int64_t groups);

}  // namespace ferry::io
