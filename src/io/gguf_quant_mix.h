// The type of each tensor in a llama-quantize file type (--gguf-type q4_0, q5_0, q4_k_s, q4_k_m,
// q5_k_m, q6_k), chosen as llama.cpp's llama_model_quantize chooses it without an importance matrix
// or overrides (src/llama-quant.cpp: tensor_allows_quantization, llama_tensor_get_type_impl,
// tensor_type_fallback; llama.cpp as vendored by llama-cpp-python 0.3.36), for the families Ferry
// exports, dense and Mixture of Experts:
//
//   kept          tensors with fewer than 2 dimensions as ggml counts them (trailing 1s dropped: Qwen2-
//                 MoE's (1, hidden) shared expert gate is 1-D), names not ending in "weight" (biases),
//                 "*_norm.weight" and the routers "ffn_gate_inp.weight": F32, as the F32/F16 file
//                 llama-quantize reads has them
//   default       the file type's: Q4_0, Q5_0, Q4_K (q4_k_s, q4_k_m), Q5_K (q5_k_m), Q6_K
//   output.weight Q6_K, or Q8_0 when its rows are not a multiple of the default type's block; so
//                 is token_embd.weight when there is no output.weight (tied embeddings: llama.cpp
//                 quantises the shared table as the output); untied token_embd keeps the default
//   attn_v / attn_qkv (Phi-3's fused projection counts as attn_v), in file order (block, then name):
//                 q4_k_m, q5_k_m: Q6_K where use_more_bits(i, n) (the first and last eighth of the
//                 layers and every third between); q4_k_s: Q5_K for the first 4
//   ffn_down      q4_k_m, q5_k_m: Q6_K where use_more_bits(layer, n_layer); q4_k_s: Q5_K in the
//                 first eighth of the layers. Dense models count ffn_down tensors in file order; with
//                 experts (n_expert > 1) the layer is read from the name ("blk.N."), so a layer's
//                 stacked ffn_down_exps and its shared expert's ffn_down_shexp both follow the layer
//   experts       a stacked (experts, rows, columns) tensor takes one type, its rows quantised each on
//                 their own, as llama-quantize does. With exactly 8 experts (llama.cpp's Mixtral rule):
//                 attn_v and attn_k Q8_0; attn_output Q5_K for q4_k_s and q4_k_m
//   70B           llama with 80 layers and grouped KV heads, qwen2 with 80 layers (llama.cpp's
//                 LLM_TYPE_70B): attn_v left at Q4_K becomes Q5_K
//   fallback      a tensor whose rows are not a multiple of its type's block: Q4_K -> Q5_0,
//                 Q5_K -> Q5_1, Q6_K -> Q8_0, and F16 when even 32 does not divide the rows
//
//   use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2   (integer division)
//
// Where llama.cpp reads a file written by a converter, Ferry quantises the weights themselves
// (float32, exact for bf16/f16/f32 checkpoints): from an F32 file of the same weights llama-quantize
// writes the same bytes (tests/parity/gguf_kquant_export_parity_test.cpp); from an F16 file of a
// bf16 or f32 model it quantises values already rounded to fp16, so its blocks can differ there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/io/ggml_types.h"
#include "src/io/gguf_tensor_layout.h"

namespace ferry::io {

// What llama.cpp's choice reads of the model besides the tensors.
struct GgufQuantModel {
  std::string architecture;  // general.architecture: "llama", "qwen2", ...
  int64_t layers = 0;        // block_count
  int64_t heads = 0;         // attention.head_count
  int64_t kv_heads = 0;      // attention.head_count_kv
  int64_t experts = 0;       // expert_count (0: a dense model)
};

struct GgufQuantTensor {
  std::string name;            // llama.cpp's: "blk.0.attn_v.weight"
  std::vector<int64_t> shape;  // torch order ((experts,) rows, columns): a row is shape.back() values
};

// The type of each of `tensors` (all the file's tensors, any order: the choice needs all of them,
// e.g. whether output.weight exists) under llama-quantize's `file_type`, in `tensors`' order.
// InternalError for a converter type (f32, f16, bf16, q8_0: gguf_tensor_type).
std::vector<GgmlType> gguf_quant_mix_types(GgufFileType file_type, const GgufQuantModel& model,
                                           const std::vector<GgufQuantTensor>& tensors);

}  // namespace ferry::io
