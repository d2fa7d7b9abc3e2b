// Int8 weights in checkpoint files (lora.quantize_base int8), named as bitsandbytes saves a
// Linear8bitLt module `M` (state_dict of an LLM.int8 model without fp16 weights):
//   M.weight          int8 (out, in): the codes (kernels/ops/int8.h)
//   M.SCB             fp32 (out): each row's absmax
//   M.weight_format   uint8 scalar (bnb's layout flag, 0 = row-major; read and dropped, not written)
// A run's checkpoints save their int8 base this way; resuming reads it back, and `ferry export`
// dequantises it. The files hold no dtype: the quantised tensor's is given by the reader.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "kernels/ops/int8.h"
#include "src/io/safetensors.h"

namespace ferry::io {

class HfWeights;

// Adds the tensors of `q` under `weight_name` (`M.weight`), on the CPU.
void add_int8_tensors(TensorMap& tensors, const std::string& weight_name, const kernels::Int8Tensor& q);

// True when `tensors` holds an int8 group (an `M.SCB` entry).
bool has_int8_tensors(const TensorMap& tensors);

// Removes every int8 group from `tensors` and returns them by weight name (`M.weight`), their dtype
// set to `dtype`. InputError naming `source` and the tensor when the codes are missing, not int8,
// or do not fit the scales.
std::map<std::string, kernels::Int8Tensor> take_int8_tensors(TensorMap& tensors, const std::string& source,
                                                             at::ScalarType dtype = at::kFloat);

// The int8 weight `weight_name` of a mapped checkpoint (views of the file), or nothing when it is
// not stored so. InputError as above.
std::optional<kernels::Int8Tensor> find_int8_weight(const HfWeights& weights, const std::string& weight_name,
                                                    const std::string& source, at::ScalarType dtype = at::kFloat);

// True when `name` is an int8 group's side tensor (`M.SCB`, `M.weight_format`).
bool is_int8_side_tensor(const std::string& name);

// Replaces every int8 group by its dequantised weight in `dtype`.
void dequantize_int8_tensors(TensorMap& tensors, const std::string& source, at::ScalarType dtype);

}  // namespace ferry::io
