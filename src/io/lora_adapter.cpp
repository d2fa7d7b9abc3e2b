// LoRA adapter files: PEFT's adapter folder, adapter_config.json, and merging adapters into base
// weights (see lora_adapter.h).
#include "src/io/lora_adapter.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kLoraA = ".lora_A.weight";
constexpr std::string_view kLoraB = ".lora_B.weight";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "x.q_proj.lora_A.weight" -> "x.q_proj"
std::string projection_of(const std::string& name) {
  return name.substr(0, name.size() - kLoraA.size());  // both suffixes have the same length
}

}  // namespace

bool is_lora_tensor(const std::string& name) { return ends_with(name, kLoraA) || ends_with(name, kLoraB); }

std::string peft_tensor_name(const std::string& name) { return kPeftTensorPrefix + name; }

std::string tensor_name_from_peft(const std::string& peft_name) {
  const std::string prefix = kPeftTensorPrefix;
  if (peft_name.rfind(prefix, 0) != 0) {
    throw InputError("adapter tensor '" + peft_name + "' does not start with '" + prefix +
                     "'; expected a PEFT adapter of a causal LM");
  }
  return peft_name.substr(prefix.size());
}

void write_adapter_config(const fs::path& file, const LoraAdapterConfig& config) {
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["r"] = config.rank;
  j["lora_alpha"] = config.alpha;
  j["lora_dropout"] = config.dropout;
  j["target_modules"] = config.target_modules;
  j["bias"] = "none";
  j["base_model_name_or_path"] = config.base_model.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(config.base_model);
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["modules_to_save"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["rank_pattern"] = nlohmann::ordered_json::object();
  j["alpha_pattern"] = nlohmann::ordered_json::object();
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["revision"] = nullptr;
  write_file_atomic(file, j.dump(2) + "\n");
}

LoraAdapterConfig read_adapter_config(const fs::path& file) {
  if (!fs::exists(file)) throw InputError(file.string() + ": missing (the LoRA adapter's configuration)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file.string() + ": not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& what) -> InputError { return InputError(file.string() + ": " + what); };
  if (!j.is_object()) throw fail("expected a JSON object");
  if (j.value("peft_type", std::string()) != "LORA") throw fail("peft_type must be \"LORA\"");
  if (j.value("use_rslora", false)) throw fail("use_rslora adapters are not supported (scaling alpha / sqrt(r))");
  if (j.value("use_dora", false)) throw fail("DoRA adapters (use_dora) are not supported");
  if (j.contains("bias") && j["bias"].is_string() && j["bias"] != "none") throw fail("only bias \"none\" is supported");
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (j.contains(key) && j[key].is_object() && !j[key].empty()) {
      throw fail(std::string(key) + " is set; adapters with per-module ranks or alphas are not supported");
    }
  }
  LoraAdapterConfig config;
  try {
    config.rank = j.at("r").get<int64_t>();
    config.alpha = j.at("lora_alpha").get<double>();
    config.dropout = j.value("lora_dropout", 0.0);
    const auto& targets = j.at("target_modules");
    if (targets.is_string()) {
      config.target_modules = {targets.get<std::string>()};
    } else {
      config.target_modules = targets.get<std::vector<std::string>>();
    }
    if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) {
      config.base_model = j["base_model_name_or_path"].get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("r, lora_alpha and target_modules are required: ") + e.what());
  }
  if (config.rank <= 0) throw fail("r must be > 0");
  return config;
}

void write_peft_adapter(const fs::path& dir, const LoraAdapterConfig& config, const TensorMap& adapters) {
  TensorMap tensors;
  for (const auto& [name, t] : adapters) {
    if (is_lora_tensor(name)) tensors[peft_tensor_name(name)] = t;
  }
  if (tensors.empty()) throw UserError("no LoRA adapter tensors to write into " + dir.string());
  fs::create_directories(dir);
  save_safetensors(dir / kAdapterWeightsFile, tensors);
  write_adapter_config(dir / kAdapterConfigFile, config);
}

PeftAdapter read_peft_adapter(const fs::path& dir) {
  PeftAdapter adapter;
  adapter.config = read_adapter_config(dir / kAdapterConfigFile);
  const fs::path file = dir / kAdapterWeightsFile;
  if (!fs::exists(file)) throw InputError(file.string() + ": missing (the LoRA adapter's weights)");
  for (auto& [name, t] : load_safetensors(file)) {
    const std::string ferry_name = tensor_name_from_peft(name);
    if (!is_lora_tensor(ferry_name)) throw InputError(file.string() + ": '" + name + "' is not a lora_A/lora_B weight");
    adapter.tensors[ferry_name] = std::move(t);
  }
  return adapter;
}

TensorMap merge_lora_tensors(const TensorMap& tensors, double scaling) {
  TensorMap merged;
  for (const auto& [name, t] : tensors) {
    if (!is_lora_tensor(name)) merged[name] = t;
  }
  for (const auto& [name, a] : tensors) {
    if (!ends_with(name, kLoraA)) continue;
    const std::string projection = projection_of(name);
    const std::string b_name = projection + std::string(kLoraB), base_name = projection + ".weight";
    auto b = tensors.find(b_name);
    auto base = merged.find(base_name);
    if (b == tensors.end()) throw InputError("LoRA weight '" + name + "' has no '" + b_name + "'");
    if (base == merged.end()) throw InputError("LoRA weight '" + name + "' has no base weight '" + base_name + "'");
    const at::Tensor& w = base->second;
    if (a.dim() != 2 || b->second.dim() != 2 || w.dim() != 2 || a.size(0) != b->second.size(1) ||
        b->second.size(0) != w.size(0) || a.size(1) != w.size(1)) {
      throw InputError("LoRA weights of '" + projection + "' do not fit its base weight (A " + std::to_string(a.size(0)) +
                       "x" + std::to_string(a.dim() == 2 ? a.size(1) : 0) + ", base " + std::to_string(w.size(0)) + "x" +
                       std::to_string(w.dim() == 2 ? w.size(1) : 0) + ")");
    }
    const at::Tensor delta = at::matmul(b->second.to(at::kFloat), a.to(at::kFloat)) * scaling;  // (out, in)
    base->second = (w.to(at::kFloat) + delta).to(w.scalar_type());
  }
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kLoraB) && !tensors.count(projection_of(name) + std::string(kLoraA))) {
      throw InputError("LoRA weight '" + name + "' has no lora_A partner");
    }
  }
  return merged;
}

}  // namespace ferry::io
