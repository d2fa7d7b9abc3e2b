// Writing a checkpoint folder out as a Hugging Face model folder (`ferry export`): config.json
// through Ferry's config reader/writer, the weights (optionally re-sharded), and the tokenizer and
// generation files beside them. Weights are streamed from the mapped input, never held twice.
// A score model (reward model, critic: `score.weight`, or a *ForSequenceClassification config.json)
// is written as its family's *ForSequenceClassification (LlamaFor..., Qwen3For...) with one label.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::io {

enum class LoraExport { merged, adapter };

struct HfExportOptions {
  std::filesystem::path checkpoint;  // folder with config.json and safetensors weights
  std::filesystem::path output;      // folder to write (created; Ferry's files in it are replaced)
  uint64_t max_shard_bytes = 0;      // 0: one model.safetensors
  LoraExport lora = LoraExport::merged;
};

struct HfExportSummary {
  int64_t tensors = 0;
  uint64_t weight_bytes = 0;
  int weight_files = 0;                  // 1, or the number of shards
  std::vector<std::string> copied_files; // tokenizer / generation files found and copied
  bool score_model = false;              // written as *ForSequenceClassification (reward model)
};

class HfWeights;

// True when a checkpoint folder has LoRA adapters: `*lora_A*` / `*lora_B*` weights, or PEFT
// adapter files (also used by the GGUF export, src/io/gguf_export.h).
bool checkpoint_has_lora(const std::filesystem::path& checkpoint, const HfWeights& weights);
// InputError unless such a checkpoint holds base weights and adapters together, with
// adapter_config.json (a bare PEFT adapter folder has nothing to merge into).
void check_lora_checkpoint(const std::filesystem::path& checkpoint, const HfWeights& weights);

// The files of `checkpoint` that an export copies unchanged, as paths relative to it: the tokenizer,
// its config and special tokens, generation_config.json, the chat templates (chat_template.jinja,
// chat_template.json and the named ones in additional_chat_templates/*.jinja, sorted).
std::vector<std::string> hf_side_files(const std::filesystem::path& checkpoint);

// Copies hf_side_files(from) into `to` (subfolders created); returns what it copied.
std::vector<std::string> copy_hf_side_files(const std::filesystem::path& from, const std::filesystem::path& to);

// A checkpoint with LoRA adapters (train-sft with lora.rank > 0: base weights + `*.lora_A/B.weight`
// + adapter_config.json, src/io/lora_adapter.h) is written with the adapters merged
// (LoraExport::merged) or as a PEFT adapter folder (LoraExport::adapter).
// Throws UserError for an impossible request (output == checkpoint, --lora adapter without LoRA
// weights), InputError for a missing or corrupt checkpoint, ConfigError for a bad config.json.
HfExportSummary export_hf_model(const HfExportOptions& options);

}  // namespace ferry::io
