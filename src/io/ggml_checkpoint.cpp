// ggml weights in checkpoint tensor maps (see ggml_checkpoint.h).
#include "src/io/ggml_checkpoint.h"

#include <ATen/ATen.h>

#include <vector>

#include "core/error.h"
#include "src/io/hf_checkpoint.h"

namespace ferry::io {
namespace {

const std::string kTypeSuffix = ".ggml_type";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

GgmlTensor checked(const std::string& source, const std::string& w, const at::Tensor& blocks, const at::Tensor& type) {
  if (type.scalar_type() != at::kInt || type.numel() != 1) {
    throw InputError(detail::concat(source, ": ", w, kTypeSuffix, " is ", c10::toString(type.scalar_type()), " ",
                                    type.sizes(), "; expected one int32 (the ggml type number)"));
  }
  const int32_t number = type.reshape({1}).to(at::kCPU).data_ptr<int32_t>()[0];
  const GgmlTypeTraits* traits = number >= 0 ? find_ggml_type(static_cast<uint32_t>(number)) : nullptr;
  if (traits == nullptr) {
    throw InputError(detail::concat(source, ": ", w, " is stored in ggml ", ggml_type_name(static_cast<uint32_t>(number)),
                                    ", which Ferry does not read (it reads ", ggml_supported_type_names(), ")"));
  }
  if (!blocks.defined()) {
    throw InputError(source + ": ggml weight " + w + " is missing (its type " + w + kTypeSuffix +
                     " is there); the checkpoint is incomplete: copy it again");
  }
  return ggml_tensor_from_blocks(blocks.contiguous(), traits->type, source + ": " + w);
}

}  // namespace

void add_ggml_tensors(TensorMap& tensors, const std::string& w, const GgmlTensor& q) {
  tensors[w] = q.blocks.to(at::kCPU);
  tensors[w + kTypeSuffix] = at::full({1}, static_cast<int32_t>(q.type), at::TensorOptions().dtype(at::kInt));
}

bool has_ggml_tensors(const TensorMap& tensors) {
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kTypeSuffix)) return true;
  }
  return false;
}

std::map<std::string, GgmlTensor> take_ggml_tensors(TensorMap& tensors, const std::string& source) {
  std::vector<std::string> weights;
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kTypeSuffix)) weights.push_back(name.substr(0, name.size() - kTypeSuffix.size()));
  }
  std::map<std::string, GgmlTensor> out;
  for (const std::string& w : weights) {
    auto found = tensors.find(w);
    out.emplace(w, checked(source, w, found == tensors.end() ? at::Tensor() : found->second, tensors.at(w + kTypeSuffix)));
    tensors.erase(w);
    tensors.erase(w + kTypeSuffix);
  }
  return out;
}

std::optional<GgmlTensor> find_ggml_weight(const HfWeights& weights, const std::string& w, const std::string& source) {
  if (!weights.contains(w + kTypeSuffix)) return std::nullopt;
  return checked(source, w, weights.contains(w) ? weights.tensor(w) : at::Tensor(), weights.tensor(w + kTypeSuffix));
}

bool is_ggml_side_tensor(const std::string& name) { return ends_with(name, kTypeSuffix); }

void dequantize_ggml_tensors(TensorMap& tensors, const std::string& source) {
  for (auto& [name, q] : take_ggml_tensors(tensors, source)) tensors[name] = ggml_dequantize(q, at::kFloat);
}

}  // namespace ferry::io
