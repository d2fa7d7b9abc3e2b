// `ferry export` work: config, weights and side files from one folder to another (see hf_export.h).
#include "src/io/hf_export.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/ggml_checkpoint.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/int8_checkpoint.h"
#include "src/io/lora_adapter.h"
#include "src/io/nf4_checkpoint.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

bool same_folder(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::exists(b) && fs::equivalent(a, b, ec);
}

// --lora adapter: adapter_config.json + adapter_model.safetensors (PEFT names) + side files.
HfExportSummary export_lora_adapter(const fs::path& in, const fs::path& out, const HfWeights& weights) {
  HfExportSummary summary;
  TensorMap adapters;
  for (const auto& name : weights.names()) {
    if (!is_lora_tensor(name)) continue;
    at::Tensor view = weights.tensor(name);
    summary.weight_bytes += static_cast<uint64_t>(view.numel()) * view.element_size();
    adapters.emplace(name, std::move(view));
  }
  summary.tensors = static_cast<int64_t>(adapters.size());
  write_peft_adapter(out, read_adapter_config(in / kAdapterConfigFile), adapters);
  summary.weight_files = 1;
  summary.copied_files = copy_hf_side_files(in, out);
  return summary;
}

}  // namespace

// LoRA weights are named "...q_proj.lora_A.weight" (PEFT) or sit in a PEFT adapter folder.
bool checkpoint_has_lora(const fs::path& checkpoint, const HfWeights& weights) {
  if (fs::exists(checkpoint / "adapter_config.json") || fs::exists(checkpoint / "adapter_model.safetensors")) return true;
  for (const auto& name : weights.names()) {
    if (name.find("lora_A") != std::string::npos || name.find("lora_B") != std::string::npos) return true;
  }
  return false;
}

// A checkpoint with LoRA must hold the base weights and the adapters together (what train-sft
// writes); a PEFT adapter folder alone has nothing to merge into.
void check_lora_checkpoint(const fs::path& in, const HfWeights& weights) {
  const auto& names = weights.names();
  if (std::none_of(names.begin(), names.end(), [](const std::string& n) { return is_lora_tensor(n); })) {
    throw InputError("checkpoint '" + in.string() + "' has adapter files but its weights hold no lora_A/lora_B "
                     "tensors; export needs a Ferry checkpoint with base weights and adapters (output.dir/step-N)");
  }
  if (!fs::exists(in / kAdapterConfigFile)) {
    throw InputError("checkpoint '" + in.string() + "' has LoRA weights but no " + kAdapterConfigFile +
                     " (rank and alpha are needed to apply them)");
  }
}

std::vector<std::string> hf_side_files(const fs::path& checkpoint) {
  std::vector<std::string> files;
  for (const char* name : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "generation_config.json", "chat_template.jinja", "chat_template.json"}) {
    if (fs::is_regular_file(checkpoint / name)) files.emplace_back(name);
  }
  // Named templates as transformers saves them (`jinja:NAME` selects one).
  std::vector<std::string> named;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoint / "additional_chat_templates", ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".jinja") {
      named.push_back((fs::path("additional_chat_templates") / entry.path().filename()).string());
    }
  }
  std::sort(named.begin(), named.end());
  files.insert(files.end(), named.begin(), named.end());
  return files;
}

std::vector<std::string> copy_hf_side_files(const fs::path& from, const fs::path& to) {
  std::vector<std::string> files = hf_side_files(from);
  for (const auto& name : files) {
    fs::create_directories((to / name).parent_path());
    write_file_atomic(to / name, read_file(from / name));
  }
  return files;
}

HfExportSummary export_hf_model(const HfExportOptions& options) {
  const fs::path& in = options.checkpoint;
  const fs::path& out = options.output;
  if (!fs::is_directory(in)) throw InputError("checkpoint folder '" + in.string() + "' does not exist or is not a folder");
  if (!fs::exists(in / "config.json")) {
    throw InputError("checkpoint folder '" + in.string() + "' has no config.json; pass a Hugging Face model folder or a "
                     "Ferry checkpoint (output.dir/step-N or output.dir/final)");
  }
  if (same_folder(in, out)) {
    throw UserError("--output '" + out.string() + "' is the checkpoint folder itself; choose a new folder");
  }

  const ModelShape config = read_hf_config(in / "config.json");
  const HfWeights weights(in);
  const bool lora = checkpoint_has_lora(in, weights);
  if (options.lora == LoraExport::adapter && !lora) {
    throw UserError("--lora adapter: checkpoint '" + in.string() + "' has no LoRA weights to save as an adapter; "
                    "export the full model with --lora merged (the default)");
  }
  HfExportSummary summary;
  if (lora) check_lora_checkpoint(in, weights);
  if (lora && options.lora == LoraExport::adapter) return export_lora_adapter(in, out, weights);

  // Zero-copy views of the mapped input: the writer streams them out one tensor at a time. With
  // LoRA, the base weights with the adapters merged in (the merged ones are owned copies).
  TensorMap tensors;
  for (const auto& name : weights.names()) tensors.emplace(name, weights.tensor(name));
  // A QLoRA checkpoint's 4-bit base (bitsandbytes' layout): dequantised to the dtype it was trained in.
  if (has_nf4_tensors(tensors)) dequantize_nf4_tensors(tensors, "checkpoint '" + in.string() + "'");
  // An int8 base: dequantised to the dtype config.json records (the run's precision).
  if (has_int8_tensors(tensors)) {
    const at::ScalarType dtype = config.torch_dtype == "bfloat16" ? at::kBFloat16
                                 : config.torch_dtype == "float16" ? at::kHalf
                                                                   : at::kFloat;
    dequantize_int8_tensors(tensors, "checkpoint '" + in.string() + "'", dtype);
  }
  // A GGUF model's base (lora.quantize_base gguf): its ggml blocks dequantised to float32.
  if (has_ggml_tensors(tensors)) dequantize_ggml_tensors(tensors, "checkpoint '" + in.string() + "'");
  if (lora) tensors = merge_lora_tensors(tensors, read_adapter_config(in / kAdapterConfigFile).scaling());
  for (const auto& [name, t] : tensors) summary.weight_bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
  summary.tensors = static_cast<int64_t>(tensors.size());

  // A reward model / critic (score.weight, or a *ForSequenceClassification config) goes back out
  // as a sequence classifier; everything else as a causal LM.
  const HfHead head = read_hf_head(in / "config.json") == HfHead::score || tensors.count("score.weight") > 0
                          ? HfHead::score
                          : HfHead::causal_lm;
  if (head == HfHead::score) {
    const auto found = tensors.find("score.weight");
    if (found == tensors.end()) {
      throw InputError("checkpoint '" + in.string() + "': config.json names a sequence classifier but the weights have "
                       "no score.weight");
    }
    if (found->second.dim() != 2 || found->second.size(0) != 1) {
      throw InputError("checkpoint '" + in.string() + "': score.weight must have one row (one output), got shape " +
                       c10::str(found->second.sizes()));
    }
  }
  summary.score_model = head == HfHead::score;

  fs::create_directories(out);
  save_hf_weights(out, tensors, options.max_shard_bytes);
  write_hf_config(out / "config.json", config, head);
  // Reopening validates what was written (headers, index, every tensor present).
  const HfWeights written(out);
  FERRY_CHECK(written.names().size() == tensors.size(), "export wrote ", written.names().size(), " of ", tensors.size(), " tensors");
  summary.weight_files = static_cast<int>(written.files().size());
  summary.copied_files = copy_hf_side_files(in, out);
  return summary;
}

}  // namespace ferry::io
