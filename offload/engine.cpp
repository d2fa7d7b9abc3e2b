// What every parameter engine shares: grouping a model's parameters, the memory report, options
// from the config, and the policy -> engine factory.
#include "offload/engine.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/host_memory.h"
#include "offload/chunked_engine.h"
#include "offload/plain_engine.h"
#include "src/model/ggml_linear.h"
#include "src/model/int8_linear.h"
#include "src/model/model_heads.h"
#include "src/model/nf4_linear.h"

namespace ferry::offload {
namespace {

// "model.layers.12.mlp.up_proj.weight" -> 12; -1 when the name is not inside a decoder layer.
int64_t layer_index_of(const std::string& name) {
  const std::string marker = "layers.";
  size_t at = name.find(marker);
  while (at != std::string::npos) {
    if (at == 0 || name[at - 1] == '.') {
      const char* begin = name.data() + at + marker.size();
      const char* end = name.data() + name.size();
      int64_t index = 0;
      auto [ptr, ec] = std::from_chars(begin, end, index);
      if (ec == std::errc() && ptr != begin && ptr != end && *ptr == '.') return index;
    }
    at = name.find(marker, at + 1);
  }
  return -1;
}

std::string human_bytes(uint64_t bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes >= (1ull << 30)) {
    out << static_cast<double>(bytes) / static_cast<double>(1ull << 30) << " GiB";
  } else if (bytes >= (1ull << 20)) {
    out << static_cast<double>(bytes) / static_cast<double>(1ull << 20) << " MiB";
  } else {
    out << static_cast<double>(bytes) / 1024.0 << " KiB";
  }
  return out.str();
}

}  // namespace

std::vector<ParameterGroup> group_parameters(const torch::nn::Module& model, bool trainable_only) {
  ParameterGroup embed{"embed", {}}, head{"head", {}};
  std::map<int64_t, ParameterGroup> layers;
  const auto place = [&](const std::string& name, const torch::Tensor& p) {
    const int64_t layer = layer_index_of(name);
    if (name.find("embed_tokens.") != std::string::npos) {
      embed.parameters.emplace_back(name, p);
    } else if (layer >= 0) {
      auto& group = layers[layer];
      group.name = "layers." + std::to_string(layer);
      group.parameters.emplace_back(name, p);
    } else {
      head.parameters.emplace_back(name, p);
    }
  };
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (trainable_only && !item.value().requires_grad()) continue;
    place(item.key(), item.value());
  }
  if (!trainable_only) {
    // QLoRA's quantised base weights are buffers of their Nf4Weight / Int8Weight / GgmlWeight
    // modules, frozen weights all the same.
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      const torch::nn::Module* module = item.value().get();
      if (dynamic_cast<const Nf4WeightImpl*>(module) == nullptr && dynamic_cast<const Int8WeightImpl*>(module) == nullptr &&
          dynamic_cast<const GgmlWeightImpl*>(module) == nullptr) {
        continue;
      }
      for (const auto& buffer : item.value()->named_buffers(/*recurse=*/false)) {
        place(item.key() + "." + buffer.key(), buffer.value());
      }
    }
  }
  if (const auto* lm = dynamic_cast<const CausalLMImpl*>(&model); lm != nullptr && lm->tied()) {
    head.also_uses.push_back("embed");  // the LM head is the embedding matrix
  }
  std::vector<ParameterGroup> groups;
  if (!embed.parameters.empty()) groups.push_back(std::move(embed));
  for (auto& [index, group] : layers) groups.push_back(std::move(group));
  if (!head.parameters.empty()) groups.push_back(std::move(head));
  return groups;
}

uint64_t EngineMemoryReport::bytes_on(const std::string& tier) const {
  uint64_t total = 0;
  for (const Line& line : lines) {
    if (line.tier == tier) total += line.bytes;
  }
  return total;
}

std::string EngineMemoryReport::summary() const {
  std::ostringstream out;
  for (const Line& line : lines) out << "  " << line.what << " on " << line.tier << ": " << human_bytes(line.bytes) << "\n";
  return out.str();
}

bool takes_weight_decay(const std::string& name, const torch::Tensor& parameter) {
  return parameter.dim() >= 2 && name.find("norm") == std::string::npos && name.find("bias") == std::string::npos;
}

kernels::AdamWParams EngineOptions::adamw_params(double learning_rate, int64_t step) const {
  kernels::AdamWParams params;
  params.lr = learning_rate;
  params.beta1 = beta1;
  params.beta2 = beta2;
  params.eps = eps;
  params.step = step;
  return params;
}

bool EngineOptions::recomputes_layer_group(int64_t group_index) const {
  return std::find(recompute_layers.begin(), recompute_layers.end(), group_index - 1) != recompute_layers.end();
}

EngineOptions EngineOptions::from_config(const Config& config) {
  EngineOptions options;
  options.policy = config.offload.policy;
  options.precision = config.train.precision;
  options.beta1 = config.train.adam_beta1;
  options.beta2 = config.train.adam_beta2;
  options.eps = config.train.adam_eps;
  options.weight_decay = config.train.weight_decay;
  options.cpu_threads = config.offload.cpu_threads;
  options.device_budget = config.offload.gpu_memory.bytes;
  options.host_budget = resolve_host_budget(config.offload.host_memory.bytes);
  options.optimizer_state = config.offload.optimizer_state;
  options.master_weights = config.offload.master_weights;
  options.rounding_seed = static_cast<uint64_t>(config.train.seed);
  options.optimizer_state_tier = config.offload.optimizer_state_tier;
  options.params_tier = config.offload.params_tier;
  options.nvme_dir = config.offload.nvme_dir;
  options.nvme_budget = config.offload.nvme_memory.bytes;
  options.chunk_size = config.offload.chunk_size.bytes;
  options.prefetch = config.offload.prefetch;
  options.activation_offload = config.train.activation_offload;
  return options;
}

std::unique_ptr<ParameterEngine> make_parameter_engine(const EngineOptions& options) {
  switch (options.policy) {
    case OffloadPolicy::none: return std::make_unique<PlainEngine>(options);
    case OffloadPolicy::optimizer:
    case OffloadPolicy::params: return std::make_unique<ChunkedEngine>(options);
    case OffloadPolicy::auto_: break;
  }
  throw InternalError("offload.policy auto must be resolved into a plan (resolve_auto_policy) before the engine is made");
}

}  // namespace ferry::offload
