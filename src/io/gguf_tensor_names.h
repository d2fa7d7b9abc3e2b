// How llama.cpp names and orders a Llama-family model's tensors, for both directions of GGUF
// conversion (export: gguf_export.h; import: gguf_model.h):
//   names   model.embed_tokens -> token_embd, model.norm -> output_norm, lm_head -> output,
//           model.layers.N.{input_layernorm -> attn_norm, post_attention_layernorm -> ffn_norm,
//           self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output}, self_attn.{q,k}_norm -> attn_{q,k}_norm,
//           mlp.{gate,up,down}_proj -> ffn_{gate,up,down}} as blk.N.*, .weight / .bias kept
//   rows    llama.cpp's "llama" architecture runs RoPE on interleaved pairs, so its converter
//           (LlamaModel.permute) reorders the rows of q_proj (n_head groups) and k_proj (n_kv_head
//           groups) and their biases from Hugging Face's rotate-half order: per group,
//           reshape(2, head_dim / 2) -> transpose. Reading undoes it (transformers'
//           reverse_permute_weights). qwen2 / qwen3 run in NEOX order and keep HF's rows.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "src/io/hf_tensor_specs.h"

namespace ferry::io {

// llama.cpp's name for a Hugging Face weight ("blk.3.attn_q.weight").
std::string gguf_tensor_name(const HfTensorSpec& spec);

// Which rows of a weight the "llama" architecture permutes.
enum class RowPermutation { none, query, key };
RowPermutation gguf_row_permutation(const HfTensorSpec& spec, const std::string& architecture);

// HF's rotate-half rows -> llama.cpp's interleaved pairs, per group of rows.
at::Tensor permute_rows_to_gguf(const at::Tensor& w, int64_t groups);
// The inverse: llama.cpp's interleaved pairs -> HF's rotate-half rows.
at::Tensor permute_rows_from_gguf(const at::Tensor& w, int64_t groups);

}  // namespace ferry::io
