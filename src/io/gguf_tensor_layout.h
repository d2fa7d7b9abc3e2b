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
//   experts       a Mixture of Experts' per-expert projections (model.layers.N.mlp.experts.E.gate_proj,
//                 Mixtral's block_sparse_moe.experts.E.w1 / w3 / w2) are one stacked tensor per layer
//                 and projection, as the converter merges them: blk.N.ffn_gate_exps / ffn_up_exps /
//                 ffn_down_exps, (num_experts, rows, columns) in torch order, expert E at index E.
//                 In any ggml type a row is whole blocks, so expert E is the contiguous byte range
//                 [E, E + 1) x nbytes / num_experts. The router is ffn_gate_inp, Qwen2-MoE's shared
//                 expert ffn_{gate,up,down}_shexp and its gate ffn_gate_inp_shexp ((1, hidden)).
//   types         --gguf-type f32: everything F32. f16 / bf16: matrices F16 / BF16, 1-D tensors F32.
//                 q8_0: matrices Q8_0, except a matrix whose rows are not a multiple of 32 values,
//                 which is F16 (the converter's fallback); 1-D F32. The routers (ffn_gate_inp,
//                 ffn_gate_inp_shexp) are F32 at every type, as the converter and llama-quantize
//                 keep them. These four are the types of convert_hf_to_gguf.py --outtype. q4_0, q5_0, q4_k_s, q4_k_m, q5_k_m, q6_k are
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
// The same for the model tensor `gguf_name` ("blk.0.ffn_gate_inp.weight"): the converter's names
// that stay F32 (the routers), else by shape.
GgmlType gguf_tensor_type(GgufFileType file_type, const std::string& gguf_name, const std::vector<int64_t>& shape);
// True for the tensors convert_hf_to_gguf.py always writes in F32 by name (FFN_GATE_INP,
// FFN_GATE_INP_SHEXP: a Mixture of Experts' routers).
bool gguf_router_tensor(const std::string& gguf_name);

enum class GgufRowPermutation { none, query, key };

// One Hugging Face weight as llama.cpp names and lays it out.
struct GgufTensorLayout {
  std::string gguf_name;   // "blk.0.attn_q.weight"
  std::string hf_name;     // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  GgufRowPermutation permutation = GgufRowPermutation::none;
  int64_t groups = 0;      // row groups of the permutation: n_head (query) or n_kv_head (key)
  double offset = 0;       // stored = Hugging Face weight + offset (Gemma's norms: 1)
  int64_t expert = -1;     // an expert's projection: its index in the stacked gguf_name tensor
  int64_t experts = 0;     // with expert >= 0: the stack's size (num_experts)

  // The GGUF tensor's shape (torch order): (experts, rows, columns) for an expert, else `shape`.
  std::vector<int64_t> file_shape() const;
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
