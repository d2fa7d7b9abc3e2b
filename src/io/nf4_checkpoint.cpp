// NF4 groups in checkpoint tensor maps (see nf4_checkpoint.h).
#include "src/io/nf4_checkpoint.h"

#include <ATen/ATen.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/nf4_state.h"
#include "src/io/hf_checkpoint.h"

namespace ferry::io {
namespace {

const std::string kStateSuffix = std::string(".") + kernels::kNf4QuantStateKey;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

kernels::Nf4ValueType value_type(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return kernels::Nf4ValueType::bf16;
  if (dtype == at::kHalf) return kernels::Nf4ValueType::f16;
  return kernels::Nf4ValueType::f32;
}

at::ScalarType scalar_type(kernels::Nf4ValueType type) {
  if (type == kernels::Nf4ValueType::bf16) return at::kBFloat16;
  if (type == kernels::Nf4ValueType::f16) return at::kHalf;
  return at::kFloat;
}

at::Tensor host_copy(const float* values, int64_t n) {
  return at::from_blob(const_cast<float*>(values), {n}, at::kFloat).clone();
}

// The packed codes as bytes (1-D). bitsandbytes may store them as another dtype
// (bnb_4bit_quant_storage, e.g. bfloat16 for FSDP); the bytes are the same.
at::Tensor packed_bytes(const at::Tensor& stored) {
  at::Tensor flat = stored.contiguous().reshape({-1});
  return flat.scalar_type() == at::kByte ? flat : flat.view(at::kByte);
}

// A 4-bit weight's side tensors without the JSON that describes them: a partial download or copy.
[[noreturn]] void throw_missing_state(const std::string& source, const std::string& w) {
  throw InputError(source + ": NF4 weight " + w + " lacks its tensor " + w + kStateSuffix +
                   " (its 4-bit codes and scales are there, the quant state that describes them is not); the "
                   "checkpoint is incomplete: copy or download it again");
}

}  // namespace

void add_nf4_tensors(TensorMap& tensors, const std::string& w, const kernels::Nf4Tensor& q) {
  kernels::Nf4QuantState state;
  state.shape = q.shape;
  state.blocksize = q.blocksize;
  state.dtype = value_type(q.dtype);
  state.nested = q.nested();
  state.nested_offset = q.nested_offset;
  const std::string json = kernels::nf4_quant_state_json(state);
  tensors[w] = q.packed.to(at::kCPU).reshape({q.packed.numel(), 1});
  tensors[w + "." + kernels::kNf4AbsmaxKey] = q.absmax.to(at::kCPU);
  tensors[w + "." + kernels::kNf4QuantMapKey] = host_copy(kernels::nf4_code(), 16);
  if (q.nested()) {
    tensors[w + "." + kernels::kNf4NestedAbsmaxKey] = q.nested_absmax.to(at::kCPU);
    tensors[w + "." + kernels::kNf4NestedQuantMapKey] = host_copy(kernels::nf4_dynamic_code(), 256);
  }
  at::Tensor bytes = at::empty({static_cast<int64_t>(json.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), json.data(), json.size());
  tensors[w + kStateSuffix] = bytes;
}

bool has_nf4_tensors(const TensorMap& tensors) {
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kStateSuffix)) return true;
  }
  return false;
}

bool has_nf4_weights(const HfWeights& weights) {
  for (const std::string& name : weights.names()) {
    if (ends_with(name, kStateSuffix)) return true;
  }
  return false;
}

std::map<std::string, kernels::Nf4Tensor> take_nf4_tensors(TensorMap& tensors, const std::string& source) {
  std::vector<std::string> weights;
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kStateSuffix)) weights.push_back(name.substr(0, name.size() - kStateSuffix.size()));
  }
  for (const auto& [name, t] : tensors) {
    const std::string w = name.substr(0, name.rfind(".weight.") + 7);
    if (is_nf4_side_tensor(name) && tensors.count(w + kStateSuffix) == 0) throw_missing_state(source, w);
  }
  std::map<std::string, kernels::Nf4Tensor> out;
  for (const std::string& w : weights) {
    auto take = [&](const std::string& name, bool required) -> at::Tensor {
      auto it = tensors.find(name);
      if (it == tensors.end()) {
        if (required) throw InputError(source + ": NF4 weight " + w + " lacks its tensor " + name);
        return {};
      }
      at::Tensor t = it->second.contiguous();
      tensors.erase(it);
      return t;
    };
    const at::Tensor state_bytes = take(w + kStateSuffix, true);
    if (state_bytes.scalar_type() != at::kByte) throw InputError(source + ": " + w + kStateSuffix + " is not uint8");
    const std::string json(static_cast<const char*>(state_bytes.data_ptr()), static_cast<size_t>(state_bytes.numel()));
    const kernels::Nf4QuantState state = kernels::nf4_parse_quant_state(json, source + ": " + w);
    kernels::Nf4Tensor q;
    q.shape = state.shape;
    q.blocksize = state.blocksize;
    q.dtype = scalar_type(state.dtype);
    q.nested_offset = state.nested_offset;
    q.packed = packed_bytes(take(w, true));
    q.absmax = take(w + "." + kernels::kNf4AbsmaxKey, true).reshape({-1});
    take(w + "." + kernels::kNf4QuantMapKey, false);  // the NF4 code book: fixed
    take(w + "." + kernels::kNf4NestedQuantMapKey, false);  // the dynamic code book: fixed
    if (state.nested) q.nested_absmax = take(w + "." + kernels::kNf4NestedAbsmaxKey, true).reshape({-1});
    const bool fits = q.packed.scalar_type() == at::kByte && q.packed.numel() == state.packed_bytes() &&
                      q.absmax.numel() == state.blocks() &&
                      q.absmax.scalar_type() == (state.nested ? at::kByte : at::kFloat) &&
                      (!state.nested || (q.nested_absmax.scalar_type() == at::kFloat &&
                                         q.nested_absmax.numel() == state.nested_blocks()));
    if (!fits) {
      throw InputError(detail::concat(source, ": NF4 weight ", w, " does not fit its quant state (shape ",
                                      c10::IntArrayRef(state.shape), ", blocksize ", state.blocksize,
                                      state.nested ? ", double-quantised" : "", ")"));
    }
    out.emplace(w, std::move(q));
  }
  return out;
}

std::optional<kernels::Nf4Tensor> find_nf4_weight(const HfWeights& weights, const std::string& w,
                                                  const std::string& source) {
  if (!weights.contains(w + kStateSuffix)) {
    if (weights.contains(w + "." + kernels::kNf4AbsmaxKey)) throw_missing_state(source, w);
    return std::nullopt;
  }
  TensorMap group;
  for (const std::string& name : nf4_group_names(w)) {
    if (weights.contains(name)) group.emplace(name, weights.tensor(name));
  }
  auto found = take_nf4_tensors(group, source);
  return std::move(found.at(w));
}

std::vector<std::string> nf4_group_names(const std::string& w) {
  std::vector<std::string> names{w};
  for (const char* key : {kernels::kNf4AbsmaxKey, kernels::kNf4QuantMapKey, kernels::kNf4NestedAbsmaxKey,
                          kernels::kNf4NestedQuantMapKey, kernels::kNf4QuantStateKey}) {
    names.push_back(w + "." + key);
  }
  return names;
}

bool is_nf4_side_tensor(const std::string& name) {
  for (const char* key : {kernels::kNf4AbsmaxKey, kernels::kNf4QuantMapKey, kernels::kNf4NestedAbsmaxKey,
                          kernels::kNf4NestedQuantMapKey, kernels::kNf4QuantStateKey}) {
    if (ends_with(name, ".weight." + std::string(key))) return true;
  }
  return false;
}

void dequantize_nf4_tensors(TensorMap& tensors, const std::string& source) {
  for (auto& [name, q] : take_nf4_tensors(tensors, source)) tensors[name] = kernels::nf4_dequantize_tensor(q, q.dtype);
}

}  // namespace ferry::io
