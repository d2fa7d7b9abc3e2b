// `ferry export --format gguf`: a checkpoint (Hugging Face model folder, LoRA adapters merged first)
// as one GGUF v3 file that llama.cpp and Ollama load, converted the way llama.cpp's
// convert_hf_to_gguf.py converts the same folder:
//
//   architecture  config.json model_type llama and mistral -> "llama" (as the converter does; a
//                 Mistral sliding window is not carried over, with a warning), qwen2 -> "qwen2",
//                 qwen3 -> "qwen3", ..., each family's gguf_architecture (src/model/family/);
//                 Mixtures of Experts: qwen3_moe -> "qwen3moe", qwen2_moe -> "qwen2moe", olmoe ->
//                 "olmoe", mixtral -> "llama" with expert_count (a sliding window is not carried over,
//                 with a warning, as for Mistral); what llama.cpp fixes in code (top-k renormalisation,
//                 experts in every layer, ...) is checked first (src/model/family/moe_gguf.h)
//   metadata      general.{architecture, type "model", name, file_type, quantization_version 2,
//                 alignment 32}; <arch>.{context_length (max_position_embeddings), embedding_length,
//                 block_count, feed_forward_length, attention.head_count, attention.head_count_kv,
//                 attention.layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count (head_dim),
//                 vocab_size}; attention.key_length / value_length when config.json gives head_dim;
//                 linear rope: rope.scaling.type "linear" + rope.scaling.factor; llama3 rope (llama
//                 only): a `rope_freqs.weight` tensor of head_dim / 2 frequency factors, computed
//                 as the converter computes them; the family's own keys (experts: expert_count,
//                 expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length);
//                 the tokenizer (src/io/gguf_tokenizer.h)
//   tensors       llama.cpp's names (a layer's experts stacked into one ffn_*_exps tensor), the
//                 llama q/k row permutation and the --gguf-type rule of
//                 src/io/gguf_tensor_layout.h (f32, f16, bf16, q8_0 as the converter writes them;
//                 q4_0, q5_0, q4_k_s, q4_k_m, q5_k_m, q6_k as llama-quantize writes them from an F32
//                 file: its per-tensor types, src/io/gguf_quant_mix.h, and its quantisers,
//                 kernels/cpu/ggml_quantize.h, bit for bit); general.file_type: llama.cpp's ftype
//                 (0 f32, 1 f16, 32 bf16, 7 q8_0, 2 q4_0, 8 q5_0, 14 q4_k_s, 15 q4_k_m, 17 q5_k_m, 18 q6_k).
//   LoRA          merged first (W + alpha / r * B @ A, in fp32) by default; with `merge_lora` false
//                 the adapters are left out and the base weights written alone (`--lora none`: the
//                 base a llama.cpp LoRA adapter, gguf_adapter_export.h, is applied to).
//
// Tensors are converted and written one at a time from the mapped safetensors (a LoRA-adapted
// weight is merged just before it is written), so memory holds one converted tensor, never a second
// copy of the model. The file is written to a temporary name and renamed into place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "src/io/gguf_tensor_layout.h"
#include "src/io/gguf_writer.h"

namespace ferry::io {

struct GgufExportOptions {
  std::filesystem::path checkpoint;  // folder with config.json, safetensors weights and the tokenizer
  std::filesystem::path output;      // a "*.gguf" file, or a folder: <output>/model.gguf
  GgufFileType type = GgufFileType::f16;
  std::string name;                  // general.name; empty: from the checkpoint folder (see below)
  std::string pre;                   // tokenizer.ggml.pre override for BPE tokenizers (--gguf-pre)
  bool merge_lora = true;            // false (--lora none): a LoRA checkpoint's base weights alone
};

struct GgufExportSummary {
  std::filesystem::path file;                  // the file written
  std::string architecture;                    // "llama", "qwen2", "qwen3"
  std::string name;                            // general.name
  int64_t tensors = 0;
  uint64_t file_bytes = 0;
  std::map<std::string, int64_t> tensor_types;  // "F16" -> count
  bool lora_merged = false;
  bool lora_left_out = false;                  // merge_lora false on a LoRA checkpoint
  std::string tokenizer;                       // "llama (SentencePiece)" / "gpt2 (byte-level BPE, pre qwen2)"
  int64_t vocab_size = 0;
  std::vector<std::string> warnings;
};

// `<output>` when it ends in ".gguf", else `<output>/model.gguf`.
std::filesystem::path gguf_output_file(const std::filesystem::path& output);

// general.name when none is given: the checkpoint folder's name, with its parent's in front for
// Ferry's own checkpoint names ("runs/demo/final" -> "demo-final", ".../step-200" -> "<run>-step-200").
std::string default_gguf_name(const std::filesystem::path& checkpoint);

// Throws InputError for a missing or corrupt checkpoint or tokenizer, a weight that is missing,
// unexpected or of the wrong shape (naming it); ConfigError for a bad config.json; UserError for a
// model llama.cpp cannot run as exported (a reward model / critic, llama3 rope outside llama).
GgufExportSummary export_gguf_model(const GgufExportOptions& options);

}  // namespace ferry::io
