// Loading and saving parameters by name, and initialisation.
#include "src/model/model_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "src/io/ggml_checkpoint.h"
#include "src/io/int8_checkpoint.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/ggml_linear.h"
#include "src/model/int8_linear.h"
#include "src/model/model_heads.h"
#include "src/model/nf4_linear.h"

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
  if (auto* lm = dynamic_cast<CausalLMImpl*>(&model)) return lm->tied();
  return false;
}

// QLoRA's quantised projections of type W (Nf4WeightImpl, Int8WeightImpl: the child `suffix` of
// their Linear) by the name of the weight they replace: `...q_proj.nf4` -> `...q_proj.weight`.
template <class W>
std::map<std::string, W*> quantized_weights(const torch::nn::Module& model, const std::string& suffix) {
  std::map<std::string, W*> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* weight = dynamic_cast<W*>(item.value().get());
    if (weight != nullptr && ends_with(item.key(), suffix)) {
      out.emplace(item.key().substr(0, item.key().size() - suffix.size()) + ".weight", weight);
    }
  }
  return out;
}

std::map<std::string, Nf4WeightImpl*> nf4_weights(const torch::nn::Module& model) {
  return quantized_weights<Nf4WeightImpl>(model, ".nf4");
}

std::map<std::string, Int8WeightImpl*> int8_weights(const torch::nn::Module& model) {
  return quantized_weights<Int8WeightImpl>(model, ".int8");
}

// The NF4 side of a load: bitsandbytes' groups for the model's NF4 weights go into them as they are,
// other groups (the model has a float weight there) are dequantised in the map, and a float tensor
// given for an NF4 weight is quantised into it (a full-precision checkpoint under QLoRA). Everything
// handled leaves the map; the rest is load_state's usual business.
void load_nf4_weights(const torch::nn::Module& model, io::TensorMap& tensors, const std::string& source) {
  const auto weights = nf4_weights(model);
  for (auto& [name, q] : io::take_nf4_tensors(tensors, source)) {
    auto it = weights.find(name);
    if (it != weights.end()) {
      it->second->assign(q);
    } else {
      tensors[name] = kernels::nf4_dequantize_tensor(q, q.dtype);
    }
  }
  for (const auto& [name, nf4] : weights) {
    auto it = tensors.find(name);
    if (it == tensors.end() || !at::isFloatingType(it->second.scalar_type())) continue;
    if (it->second.sizes() != c10::IntArrayRef(nf4->quantized().shape)) continue;  // reported as a mismatch below
    nf4->assign(kernels::nf4_quantize_tensor(it->second.to(nf4->quantized().dtype), nf4->quantized().nested(),
                                             nf4->quantized().blocksize));
    tensors.erase(it);
  }
}

// The int8 side of a load, as load_nf4_weights: groups for the model's int8 weights go in as they
// are, others are dequantised in the map (fp32; load_state converts), and a float tensor given for
// an int8 weight is quantised into it.
void load_int8_weights(const torch::nn::Module& model, io::TensorMap& tensors, const std::string& source) {
  const auto weights = int8_weights(model);
  for (auto& [name, q] : io::take_int8_tensors(tensors, source)) {
    auto it = weights.find(name);
    if (it != weights.end()) {
      q.dtype = it->second->quantized().dtype;
      it->second->assign(q);
    } else {
      tensors[name] = kernels::int8_dequantize_tensor(q, at::kFloat);
    }
  }
  for (const auto& [name, int8] : weights) {
    auto it = tensors.find(name);
    if (it == tensors.end() || !at::isFloatingType(it->second.scalar_type())) continue;
    if (it->second.sizes() != int8->quantized().cb.sizes()) continue;  // reported as a mismatch below
    kernels::Int8Tensor q = kernels::int8_quantize_tensor(it->second.to(int8->quantized().dtype));
    int8->assign(q);
    tensors.erase(it);
  }
}

std::map<std::string, GgmlWeightImpl*> ggml_weights(const torch::nn::Module& model) {
  return quantized_weights<GgmlWeightImpl>(model, ".ggml");
}

// The ggml side of a load (a GGUF model's base, lora.quantize_base gguf): blocks for the model's
// ggml weights go in as they are, others are dequantised in the map (fp32; load_state converts). A
// float tensor given for a ggml weight is an InputError: Ferry does not quantise into ggml types.
void load_ggml_weights(const torch::nn::Module& model, io::TensorMap& tensors, const std::string& source) {
  const auto weights = ggml_weights(model);
  for (auto& [name, q] : io::take_ggml_tensors(tensors, source)) {
    auto it = weights.find(name);
    if (it != weights.end()) {
      try {
        it->second->assign(q);
      } catch (const InputError& e) {
        throw InputError(source + ": " + name + ": " + e.what());
      }
    } else {
      tensors[name] = io::ggml_dequantize(q, at::kFloat);
    }
  }
  for (const auto& [name, ggml] : weights) {
    auto it = tensors.find(name);
    if (it == tensors.end() || !at::isFloatingType(it->second.scalar_type())) continue;
    throw InputError(source + " stores " + name + " in full precision, but the model keeps it in the GGUF's " +
                     io::ggml_type_name(ggml->quantized().type) + " blocks (lora.quantize_base gguf), which Ferry "
                     "does not quantise into; load it with lora.quantize_base none");
  }
}

}  // namespace

void load_state(torch::nn::Module& model, const io::TensorMap& given, const LoadStateOptions& options) {
  io::TensorMap quantized_rest;
  const bool nf4 = !nf4_weights(model).empty() || io::has_nf4_tensors(given);
  const bool int8 = !int8_weights(model).empty() || io::has_int8_tensors(given);
  const bool ggml = !ggml_weights(model).empty() || io::has_ggml_tensors(given);
  if (nf4 || int8 || ggml) {
    quantized_rest = given;
    if (nf4) load_nf4_weights(model, quantized_rest, options.source);
    if (int8) load_int8_weights(model, quantized_rest, options.source);
    if (ggml) load_ggml_weights(model, quantized_rest, options.source);
  }
  const io::TensorMap& tensors = nf4 || int8 || ggml ? quantized_rest : given;
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
  for (const auto& [name, nf4] : nf4_weights(model)) io::add_nf4_tensors(state, name, nf4->quantized());
  for (const auto& [name, int8] : int8_weights(model)) io::add_int8_tensors(state, name, int8->quantized());
  for (const auto& [name, ggml] : ggml_weights(model)) io::add_ggml_tensors(state, name, ggml->quantized());
  return state;
}

void init_model_weights(torch::nn::Module& model, const ModelShape& config, double std, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& parameter = item.value();
    if (ends_with(name, "norm.weight")) {
      parameter.fill_(config.norm_weight == NormWeight::one_plus ? 0.0 : 1.0);  // Gemma: (1 + w), w = 0
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
