// NF4 weights in checkpoint files, named as bitsandbytes saves a 4-bit Linear's weight `W`
// (kernels/cpu/nf4_state.h lists the tensors: W uint8 (ceil(n / 2), 1), W.absmax, W.quant_map,
// W.nested_absmax, W.nested_quant_map, W.quant_state.bitsandbytes__nf4). A QLoRA run saves its
// base this way (4-bit checkpoints); resuming reads it back, and `ferry export` dequantises it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops/nf4.h"
#include "src/io/safetensors.h"

namespace ferry::io {

class HfWeights;

// Adds the tensors of `q` under `weight_name` (e.g. model.layers.0.self_attn.q_proj.weight), on the
// CPU (copies when q lives elsewhere, else the same storage).
void add_nf4_tensors(TensorMap& tensors, const std::string& weight_name, const kernels::Nf4Tensor& q);

// True when `tensors` holds an NF4 group (a `*.quant_state.bitsandbytes__nf4` entry).
bool has_nf4_tensors(const TensorMap& tensors);

// True when the folder `weights` holds an NF4 group.
bool has_nf4_weights(const HfWeights& weights);

// Removes every NF4 group from `tensors` and returns them by weight name, parsed. InputError naming
// `source` and the tensor when a group is incomplete or does not fit its quant state.
std::map<std::string, kernels::Nf4Tensor> take_nf4_tensors(TensorMap& tensors, const std::string& source);

// For readers of a mapped checkpoint (GGUF export): the NF4 weight `weight_name` of `weights`
// (views of the mapped file), or nothing when that weight is not stored 4-bit. InputError as above.
std::optional<kernels::Nf4Tensor> find_nf4_weight(const HfWeights& weights, const std::string& weight_name,
                                                  const std::string& source);

// Every tensor name an NF4 group of `weight_name` may have: W, W.absmax, ..., W.quant_state.*.
std::vector<std::string> nf4_group_names(const std::string& weight_name);

// True when `name` is one of an NF4 group's side tensors (`W.absmax`, `W.quant_map`, ...), not `W`.
bool is_nf4_side_tensor(const std::string& name);

// Replaces every NF4 group by its dequantised weight, in the dtype its quant state records (what
// the run that quantised it computed in).
void dequantize_nf4_tensors(TensorMap& tensors, const std::string& source);

}  // namespace ferry::io
