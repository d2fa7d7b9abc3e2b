// Loading and saving parameters by name, and initialisation.
#include "src/model/model_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "src/core/error.h"
#include "src/model/llama_heads.h"

namespace ferry {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string join_limited(const std::vector<std::string>& items, size_t limit = 20) {
  std::ostringstream out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out << (i ? ", " : "") << items[i];
  if (items.size() > limit) out << ", ... (" << items.size() - limit << " more)";
  return out.str();
}

bool ties_lm_head(torch::nn::Module& model) {
  if (auto* lm = dynamic_cast<LlamaForCausalLMImpl*>(&model)) return lm->tied();
  return false;
}

}  // namespace

void load_state(torch::nn::Module& model, const io::TensorMap& tensors, const LoadStateOptions& options) {
  auto parameters = model.named_parameters(/*recurse=*/true);
  const bool tied = ties_lm_head(model);
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& item : parameters) {
    if (tensors.count(item.key()) == 0 && !contains(options.allow_missing, item.key())) missing.push_back(item.key());
  }
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor* parameter = parameters.find(name);
    if (parameter == nullptr) {
      const bool ignored = ends_with(name, "rotary_emb.inv_freq") || (tied && name == "lm_head.weight") ||
                           contains(options.ignore_unexpected, name);
      if (!ignored) unexpected.push_back(name);
    } else if (!tensor.defined() || tensor.sizes() != parameter->sizes()) {
      std::ostringstream line;
      line << name << " (checkpoint " << (tensor.defined() ? tensor.sizes() : c10::IntArrayRef{}) << ", model "
           << parameter->sizes() << ")";
      mismatched.push_back(line.str());
    } else if (!at::isFloatingType(tensor.scalar_type())) {
      mismatched.push_back(name + " (not a floating-point tensor: " + std::string(c10::toString(tensor.scalar_type())) + ")");
    }
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::ostringstream message;
    message << options.source << " does not fit the model:";
    if (!missing.empty()) message << "\n  missing (" << missing.size() << "): " << join_limited(missing);
    if (!unexpected.empty()) message << "\n  unexpected (" << unexpected.size() << "): " << join_limited(unexpected);
    if (!mismatched.empty()) message << "\n  shape mismatch (" << mismatched.size() << "): " << join_limited(mismatched);
    message << "\nCheck that config.json describes these weights (layers, sizes, tie_word_embeddings, biases).";
    throw InputError(message.str());
  }
  torch::NoGradGuard no_grad;
  for (auto& item : parameters) {
    auto found = tensors.find(item.key());
    if (found != tensors.end()) item.value().copy_(found->second);
  }
}

io::TensorMap state_of(const torch::nn::Module& model) {
  io::TensorMap state;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) state[item.key()] = item.value().detach();
  return state;
}

void init_llama_weights(torch::nn::Module& model, const LlamaConfig& config, double std, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& parameter = item.value();
    if (ends_with(name, "norm.weight")) {
      parameter.fill_(1.0);
    } else if (ends_with(name, ".bias")) {
      parameter.zero_();
    } else {
      torch::Tensor values = torch::empty(parameter.sizes(), torch::kFloat).normal_(0.0, std, generator);
      if (ends_with(name, "embed_tokens.weight") && config.pad_token_id >= 0 && config.pad_token_id < config.vocab_size) {
        values[config.pad_token_id].zero_();
      }
      parameter.copy_(values);
    }
  }
}

}  // namespace ferry
