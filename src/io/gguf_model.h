// A GGUF model file read as the Hugging Face model it was converted from, the way transformers'
// from_pretrained(..., gguf_file=...) reads it:
//
//   architecture  general.architecture picks the family whose description (src/model/family/) names
//                 it ("llama": Llama 2 / 3.x, SmolLM2, Mistral as llama, Mixtral as llama with
//                 llama.expert_count > 0; "qwen2", "qwen3", "gemma2", "gemma3", "smollm3", "olmo2",
//                 "olmo3", "phi3", "qwen3moe", "qwen2moe", "olmoe"); any other is an InputError listing
//                 them. Mixtures of Experts: <arch>.expert_count, expert_used_count,
//                 expert_feed_forward_length, expert_shared_feed_forward_length (src/model/family/moe_gguf.h)
//   config        <arch>.context_length -> max_position_embeddings, embedding_length -> hidden_size,
//                 block_count -> num_hidden_layers, feed_forward_length -> intermediate_size,
//                 attention.head_count / head_count_kv (default: head_count) -> heads / kv heads,
//                 attention.key_length (default hidden / heads) -> head_dim,
//                 attention.layer_norm_rms_epsilon, rope.freq_base (default 10000) -> rope_theta,
//                 rope.dimension_count / head_dim -> partial_rotary_factor,
//                 rope.scaling.type linear + rope.scaling.factor, a `rope_freqs.weight` tensor (llama3
//                 rope: its factors are fitted back to factor, low/high_freq_factor and the original
//                 context, and must be reproduced by them), vocab_size from <arch>.vocab_size or the
//                 token list or token_embd; tie_word_embeddings when `output.weight` is absent;
//                 biases from the tensors present; bos / eos / pad ids from tokenizer.ggml.*_token_id;
//                 then the family's own switches and keys (its description's read_gguf)
//   weights       llama.cpp's names (gguf_tensor_layout.h) back to Hugging Face's, each dequantised
//                 (ggml_dequantize.h) to float32 (F16 / BF16 tensors keep their dtype) and, for the
//                 families that permute (llama), q/k rows put back in HF's rotate-half order; Gemma's
//                 norms less the 1 the converter added. An expert's projection is its slice of the
//                 layer's stacked tensor (ffn_gate_exps etc., gguf_tensor_layout.h): expert E's bytes
//                 are the E-th of num_experts equal ranges, in every ggml type. A tensor the
//                 model needs that is missing, of the wrong shape, or one Ferry does not know is an
//                 InputError naming the file and tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config/model_shape.h"
#include "src/io/ggml_tensor.h"
#include "src/io/gguf_file.h"
#include "src/io/safetensors.h"

namespace ferry::io {

// The Hugging Face config of the model in `file`. Throws InputError naming the file and key.
ModelShape gguf_model_config(const GgufFile& file);

// The weights of a GGUF model under their Hugging Face names, converted when asked for.
class GgufWeights {
 public:
  explicit GgufWeights(GgufFile file);

  const GgufFile& file() const { return file_; }
  const ModelShape& config() const { return config_; }
  const std::vector<std::string>& names() const { return names_; }  // sorted HF names
  bool contains(const std::string& name) const { return sources_.count(name) != 0; }
  // dtype (float32, or F16 / BF16 as stored) and HF shape of the converted tensor.
  const TensorInfo& info(const std::string& name) const;
  // The converted tensor (owned, CPU).
  at::Tensor load(const std::string& name) const;
  // The GGUF tensor behind a HF name (for engines that keep the quantised blocks).
  const GgufTensorInfo& source(const std::string& name) const;
  // The bytes `name` takes in the file: the GGUF tensor's, or an expert's share of its stack.
  uint64_t stored_bytes(const std::string& name) const;
  // The stored blocks of a 2-D tensor (an expert's: its slice of the stack), owned: uint8 (rows,
  // bytes per row), rows in Hugging Face order (llama's q/k rows un-permuted by moving whole rows of
  // blocks, which is exact), for lora.quantize_base gguf (ggml_tensor.h).
  GgmlTensor packed(const std::string& name) const;

 private:
  struct Source {
    const GgufTensorInfo* tensor = nullptr;
    int64_t permute_groups = 0;  // 0: rows as stored
    double offset = 0;           // stored = Hugging Face weight + offset
    int64_t expert = -1;         // an expert: its index in the stacked tensor
    int64_t experts = 0;         // the stack's size
    TensorInfo info;

    uint64_t bytes() const { return expert < 0 ? tensor->nbytes : tensor->nbytes / static_cast<uint64_t>(experts); }
    uint64_t byte_offset() const { return expert < 0 ? 0 : static_cast<uint64_t>(expert) * bytes(); }
  };

  GgufFile file_;
  ModelShape config_;
  std::map<std::string, Source> sources_;
  std::vector<std::string> names_;
};

}  // namespace ferry::io
