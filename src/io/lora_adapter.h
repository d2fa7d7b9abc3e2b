// LoRA adapters as files, independent of the model code (so `ferry export` works on tensors):
//
//   Ferry checkpoint (output.dir/step-N with lora.rank > 0): a Hugging Face folder whose weights
//     hold the base weights and every adapter, named `model.layers.0.self_attn.q_proj.lora_A.weight`
//     (rank, in) and `...lora_B.weight` (out, rank), plus adapter_config.json (below).
//   PEFT adapter folder (what `peft.PeftModel.from_pretrained(base, dir)` loads):
//     adapter_config.json        {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r", "lora_alpha",
//                                 "lora_dropout", "target_modules", "bias": "none",
//                                 "base_model_name_or_path", ...}
//     adapter_model.safetensors  only the adapters, named `base_model.model.<Ferry name>`
//   Merged model: the base weights with W + (alpha / r) * B @ A folded in, no adapters.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "src/io/safetensors.h"

namespace ferry::io {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kPeftTensorPrefix = "base_model.model.";

// What adapter_config.json says about the adapters (plain LoRA: no rsLoRA, DoRA or biases).
struct LoraAdapterConfig {
  int64_t rank = 0;
  double alpha = 0.0;
  double dropout = 0.0;
  std::vector<std::string> target_modules;
  std::string base_model;  // base_model_name_or_path; empty when unknown (written as null)

  double scaling() const { return alpha / static_cast<double>(rank); }
};

// `...lora_A.weight` or `...lora_B.weight`.
bool is_lora_tensor(const std::string& name);

// Ferry/Hugging Face name <-> PEFT's name in adapter_model.safetensors.
std::string peft_tensor_name(const std::string& name);
std::string tensor_name_from_peft(const std::string& peft_name);  // InputError without the prefix

void write_adapter_config(const std::filesystem::path& file, const LoraAdapterConfig& config);
// InputError naming the file when it is missing, malformed, or describes an adapter Ferry cannot
// apply (peft_type other than LORA, use_rslora, use_dora, bias other than none).
LoraAdapterConfig read_adapter_config(const std::filesystem::path& file);

// Writes adapter_config.json and adapter_model.safetensors into `dir` (created). `adapters`: the
// lora_A/lora_B tensors by Ferry name (others are ignored).
void write_peft_adapter(const std::filesystem::path& dir, const LoraAdapterConfig& config, const TensorMap& adapters);

struct PeftAdapter {
  LoraAdapterConfig config;
  TensorMap tensors;  // by Ferry name
};
PeftAdapter read_peft_adapter(const std::filesystem::path& dir);

// `tensors` (base weights + adapters) with every adapter pair folded into its base weight:
// W + scaling * B @ A, computed in fp32 and stored in W's dtype; the adapter tensors are dropped.
// InputError when an adapter lacks its partner or its base weight, or shapes do not fit.
TensorMap merge_lora_tensors(const TensorMap& tensors, double scaling);

}  // namespace ferry::io
