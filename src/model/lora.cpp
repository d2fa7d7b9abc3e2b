// LoRA on a loaded Llama model: attach, freeze, read/write, merge (see lora.h).
#include "src/model/lora.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "src/io/lora_adapter.h"
#include "src/model/family/model_tensors.h"
#include "src/model/ggml_linear.h"
#include "src/model/int8_linear.h"
#include "src/model/nf4_linear.h"

namespace ferry {
namespace {

// The LoRA target name of a projection: the last part of its module path ("self_attn.qkv_proj" -> "qkv_proj").
std::string target_of(const LayerProjection& p) { return p.name.substr(p.name.rfind('.') + 1); }

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names{"q_proj",    "k_proj",  "v_proj",       "qkv_proj", "o_proj",
                                              "gate_proj", "up_proj", "gate_up_proj", "down_proj",
                                              // Mixtures of Experts: the router, Mixtral's expert
                                              // projections, and every expert projection at once
                                              "gate", "w1", "w3", "w2", "experts"};
  return names;
}

void check_lora_settings(const LoraConfig& s) {
  if (s.rank < 1) throw ConfigError("lora.rank must be >= 1 to apply LoRA (got " + std::to_string(s.rank) + ")");
  if (!(s.alpha > 0)) throw ConfigError("lora.alpha must be > 0");
  if (!(s.dropout >= 0 && s.dropout < 1)) throw ConfigError("lora.dropout must be in [0, 1)");
  if (s.target_modules.empty()) throw ConfigError("lora.target_modules: empty; name at least one projection");
  const auto& valid = lora_target_names();
  for (const auto& t : s.target_modules) {
    if (std::find(valid.begin(), valid.end(), t) == valid.end()) {
      throw ConfigError("lora.target_modules: unknown module '" + t + "'; valid: " + join_names(valid));
    }
  }
}

LoraCoverage apply_lora(DecoderModelImpl& model, const LoraConfig& settings, uint64_t seed) {
  check_lora_settings(settings);
  if (has_lora(model)) throw UserError("the model already has LoRA adapters; apply LoRA once");
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double scaling = settings.alpha / static_cast<double>(settings.rank);
  const std::vector<std::string> targets = resolve_lora_targets(model.config(), settings.target_modules);
  const bool all_experts = std::find(targets.begin(), targets.end(), "experts") != targets.end();
  LoraCoverage coverage;
  for (auto& layer : model.decoder_layers) {
    for (const LayerProjection& p : layer->projections()) {
      const bool expert = p.name.find(".experts.") != std::string::npos;
      coverage.expert_matrices += expert ? 1 : 0;
      const bool wanted = std::find(targets.begin(), targets.end(), target_of(p)) != targets.end();
      if (!wanted && !(expert && all_experts)) continue;
      ++coverage.adapted;
      coverage.adapted_experts += expert ? 1 : 0;
      // (out, in), and the dtype and device the adapter takes: the float weight's, or for a
      // quantised base (QLoRA: NF4, int8 or a GGUF's ggml blocks) the dtype it was quantised from or
      // loaded in (the run's) and where its codes live.
      const Nf4WeightImpl* nf4 = nf4_weight_of(**p.linear);
      const Int8WeightImpl* int8 = int8_weight_of(**p.linear);
      const GgmlWeightImpl* ggml = ggml_weight_of(**p.linear);
      const torch::Tensor& w = nf4 != nullptr    ? nf4->quantized().packed
                               : int8 != nullptr ? int8->quantized().cb
                               : ggml != nullptr ? ggml->quantized().blocks
                                                 : (*p.linear)->weight;
      const int64_t out = nf4 != nullptr ? nf4->out_features() : ggml != nullptr ? ggml->out_features() : w.size(0);
      const int64_t in = nf4 != nullptr ? nf4->in_features() : ggml != nullptr ? ggml->in_features() : w.size(1);
      const at::ScalarType dtype = nf4 != nullptr    ? nf4->quantized().dtype
                                   : int8 != nullptr ? int8->quantized().dtype
                                   : ggml != nullptr ? ggml->dtype()
                                                     : w.scalar_type();
      torch::nn::Linear a(torch::nn::LinearOptions(in, settings.rank).bias(false));
      torch::nn::Linear b(torch::nn::LinearOptions(settings.rank, out).bias(false));
      // kaiming_uniform_(a=sqrt(5)) on (rank, in): gain sqrt(2 / 6), bound gain * sqrt(3 / in) = 1 / sqrt(in).
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      const torch::Tensor values = torch::empty({settings.rank, in}, torch::kFloat).uniform_(-bound, bound, generator);
      a->weight.copy_(values);
      b->weight.zero_();
      a->to(w.device(), dtype);
      b->to(w.device(), dtype);
      p.adapter->lora_A = (*p.linear)->register_module("lora_A", a);
      p.adapter->lora_B = (*p.linear)->register_module("lora_B", b);
      p.adapter->scaling = scaling;
      p.adapter->dropout = settings.dropout;
    }
  }
  return coverage;
}

void freeze_base_weights(torch::nn::Module& model) {
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!io::is_lora_tensor(item.key())) item.value().set_requires_grad(false);
  }
}

bool has_lora(const DecoderModelImpl& model) {
  for (const auto& layer : model.decoder_layers) {
    // projections() hands out mutable pointers; only read here.
    for (const LayerProjection& p : const_cast<DecoderLayerImpl&>(*layer).projections()) {
      if (p.adapter->attached()) return true;
    }
  }
  return false;
}

bool set_lora_enabled(DecoderModelImpl& model, bool enabled) {
  bool any = false;
  for (auto& layer : model.decoder_layers) {
    for (const LayerProjection& p : layer->projections()) {
      LoraAdapter& adapter = *p.adapter;
      if (!adapter.attached()) continue;
      adapter.enabled = enabled;
      any = true;
    }
  }
  return any;
}

io::TensorMap lora_state(const torch::nn::Module& model) {
  io::TensorMap out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (io::is_lora_tensor(item.key())) out[item.key()] = item.value().detach();
  }
  return out;
}

void load_lora_state(torch::nn::Module& model, const io::TensorMap& tensors, const std::string& source) {
  auto params = model.named_parameters(/*recurse=*/true);
  std::vector<std::string> missing, unexpected, misshaped;
  for (const auto& item : params) {
    if (!io::is_lora_tensor(item.key())) continue;
    auto it = tensors.find(item.key());
    if (it == tensors.end()) {
      missing.push_back(item.key());
    } else if (it->second.sizes() != item.value().sizes()) {
      misshaped.push_back(item.key());
    }
  }
  for (const auto& [name, t] : tensors) {
    if (!io::is_lora_tensor(name) || params.find(name) == nullptr) unexpected.push_back(name);
  }
  if (!missing.empty() || !unexpected.empty() || !misshaped.empty()) {
    std::string message = source + ": the LoRA adapters do not fit the model (rank and target modules must match)";
    if (!missing.empty()) message += "; missing: " + join_names(missing);
    if (!unexpected.empty()) message += "; unexpected: " + join_names(unexpected);
    if (!misshaped.empty()) message += "; wrong shape: " + join_names(misshaped);
    throw InputError(message);
  }
  torch::NoGradGuard no_grad;
  for (auto& item : params) {
    if (io::is_lora_tensor(item.key())) item.value().copy_(tensors.at(item.key()));
  }
}

void merge_lora(DecoderModelImpl& model) {
  torch::NoGradGuard no_grad;
  for (auto& layer : model.decoder_layers) {
    for (const LayerProjection& p : layer->projections()) {
      if (!p.adapter->attached()) continue;
      if (nf4_weight_of(**p.linear) != nullptr) dequantize_linear_nf4(**p.linear);  // QLoRA: merge into the float base
      if (int8_weight_of(**p.linear) != nullptr) dequantize_linear_int8(**p.linear);
      if (ggml_weight_of(**p.linear) != nullptr) dequantize_linear_ggml(**p.linear);
      torch::Tensor& w = (*p.linear)->weight;  // (out, in)
      const torch::Tensor delta =
          torch::matmul(p.adapter->lora_B->weight.to(torch::kFloat), p.adapter->lora_A->weight.to(torch::kFloat)) *
          p.adapter->scaling;
      w.copy_((w.to(torch::kFloat) + delta).to(w.scalar_type()));
      (*p.linear)->unregister_module("lora_A");
      (*p.linear)->unregister_module("lora_B");
      *p.adapter = LoraAdapter{};
    }
  }
}

}  // namespace ferry
