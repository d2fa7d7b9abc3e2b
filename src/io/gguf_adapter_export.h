// `ferry export --format gguf --lora adapter`: a LoRA checkpoint's adapters as one GGUF LoRA
// adapter file, as llama.cpp's convert_lora_to_gguf.py converts the same run's PEFT adapter
// (`--format hf --lora adapter`), for `llama-cli -m base.gguf --lora adapter.gguf` and
// llama-cpp-python's `Llama(model_path=..., lora_path=...)`:
//
//   metadata  in the converter's order: general.architecture (the base's: llama for llama and
//             mistral, qwen2, qwen3), general.type "adapter", adapter.type "lora", general.name,
//             adapter.lora.alpha (float32), general.quantization_version 2. No general.file_type,
//             no architecture hyper-parameters, no tokenizer: llama.cpp takes them from the base.
//   tensors   for every adapted projection, in the model export's order (blk.0.attn_q, attn_k, ...):
//             `<base tensor name>.lora_a` = PEFT's lora_A (rank, in), ggml ne [in, rank], and
//             `<base tensor name>.lora_b` = lora_B (out, rank), ne [rank, out], neither transposed
//             (llama.cpp computes B (A x) and checks ne as written here); for the llama architecture
//             lora_b of q_proj / k_proj has its rows permuted as the base weight's
//             (gguf_tensor_layout.h): permuting the rows of B permutes the rows of B A.
//             Types: --gguf-type's rule for matrices (f32; f16; bf16; q8_0 with the F16 fallback when
//             a row is not a multiple of 32 values, so lora_b of a rank below 32 is F16).
//   scale     llama.cpp applies W x + (alpha / rank) B (A x), rank = lora_b's ne[0]. Ferry's LoRA
//             scales by lora.alpha / lora.rank (adapter_config.json's lora_alpha / r; rsLoRA is not
//             accepted there), so adapter.lora.alpha is lora_alpha as written in adapter_config.json.
//
// The base the adapter is applied to is the run's base model: its model.path exported with
// `--format gguf`, or the checkpoint's own base weights with `--format gguf --lora none`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "src/io/gguf_tensor_layout.h"

namespace ferry::io {

struct GgufAdapterExportOptions {
  std::filesystem::path checkpoint;  // a LoRA checkpoint: base weights + lora_A/lora_B + adapter_config.json
  std::filesystem::path output;      // a "*.gguf" file, or a folder: <output>/adapter.gguf
  GgufFileType type = GgufFileType::f16;
  std::string name;                  // general.name; empty: default_gguf_name(checkpoint)
};

struct GgufAdapterExportSummary {
  std::filesystem::path file;
  std::string architecture;
  std::string name;
  int64_t tensors = 0;
  int64_t projections = 0;                      // adapted weights (two tensors each)
  uint64_t file_bytes = 0;
  std::map<std::string, int64_t> tensor_types;  // "F16" -> count
  int64_t rank = 0;
  double alpha = 0.0;
};

// `<output>` when it ends in ".gguf", else `<output>/adapter.gguf`.
std::filesystem::path gguf_adapter_output_file(const std::filesystem::path& output);

// Throws InputError for a checkpoint without LoRA weights, a LoRA weight on a module llama.cpp
// cannot map (anything but the decoder layers' q/k/v/o/gate/up/down projections), a score head
// (reward model / critic), a missing partner or a shape that does not fit its base weight, or a
// missing or unsupported adapter_config.json; UserError for an architecture GGUF export does not
// write; ConfigError for a bad config.json. Nothing is written when it throws.
GgufAdapterExportSummary export_gguf_adapter(const GgufAdapterExportOptions& options);

}  // namespace ferry::io
