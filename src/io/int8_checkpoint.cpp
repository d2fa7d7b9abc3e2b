// Int8 groups in checkpoint tensor maps (see int8_checkpoint.h).
#include "src/io/int8_checkpoint.h"

#include <ATen/ATen.h>

#include <vector>

#include "core/error.h"
#include "src/io/hf_checkpoint.h"

namespace ferry::io {
namespace {

const std::string kScbSuffix = ".SCB";
const std::string kFormatSuffix = ".weight_format";
const std::string kWeightSuffix = ".weight";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string module_of(const std::string& weight_name) {
  return ends_with(weight_name, kWeightSuffix) ? weight_name.substr(0, weight_name.size() - kWeightSuffix.size())
                                               : weight_name;
}

kernels::Int8Tensor checked(const std::string& source, const std::string& w, const at::Tensor& cb,
                            const at::Tensor& scb, at::ScalarType dtype) {
  if (!cb.defined()) {
    throw InputError(source + ": int8 weight " + w + " is missing (its scales " + module_of(w) + kScbSuffix +
                     " are there); the checkpoint is incomplete: copy it again");
  }
  if (cb.scalar_type() != at::kChar || cb.dim() != 2 || scb.scalar_type() != at::kFloat || scb.dim() != 1 ||
      scb.size(0) != cb.size(0)) {
    throw InputError(detail::concat(source, ": int8 weight ", w, " (", c10::toString(cb.scalar_type()), " ",
                                    cb.sizes(), ") does not fit its scales ", module_of(w), kScbSuffix, " (",
                                    c10::toString(scb.scalar_type()), " ", scb.sizes(),
                                    "); expected int8 (out, in) codes and fp32 (out) scales"));
  }
  kernels::Int8Tensor q;
  q.cb = cb.contiguous();
  q.scb = scb.contiguous();
  q.dtype = dtype;
  return q;
}

}  // namespace

void add_int8_tensors(TensorMap& tensors, const std::string& w, const kernels::Int8Tensor& q) {
  tensors[w] = q.cb.to(at::kCPU);
  tensors[module_of(w) + kScbSuffix] = q.scb.to(at::kCPU);
}

bool has_int8_tensors(const TensorMap& tensors) {
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kScbSuffix)) return true;
  }
  return false;
}

std::map<std::string, kernels::Int8Tensor> take_int8_tensors(TensorMap& tensors, const std::string& source,
                                                             at::ScalarType dtype) {
  std::vector<std::string> modules;
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kScbSuffix)) modules.push_back(name.substr(0, name.size() - kScbSuffix.size()));
  }
  std::map<std::string, kernels::Int8Tensor> out;
  for (const std::string& m : modules) {
    const std::string w = m + kWeightSuffix;
    auto found = tensors.find(w);
    const at::Tensor cb = found == tensors.end() ? at::Tensor() : found->second;
    out.emplace(w, checked(source, w, cb, tensors.at(m + kScbSuffix), dtype));
    tensors.erase(w);
    tensors.erase(m + kScbSuffix);
    tensors.erase(m + kFormatSuffix);
  }
  return out;
}

std::optional<kernels::Int8Tensor> find_int8_weight(const HfWeights& weights, const std::string& w,
                                                    const std::string& source, at::ScalarType dtype) {
  const std::string scb = module_of(w) + kScbSuffix;
  if (!weights.contains(scb)) return std::nullopt;
  return checked(source, w, weights.contains(w) ? weights.tensor(w) : at::Tensor(), weights.tensor(scb), dtype);
}

bool is_int8_side_tensor(const std::string& name) { return ends_with(name, kScbSuffix) || ends_with(name, kFormatSuffix); }

void dequantize_int8_tensors(TensorMap& tensors, const std::string& source, at::ScalarType dtype) {
  for (auto& [name, q] : take_int8_tensors(tensors, source, dtype)) tensors[name] = kernels::int8_dequantize_tensor(q, dtype);
}

}  // namespace ferry::io
