// ggml-quantised weights in checkpoint files (lora.quantize_base gguf): a run on a GGUF model saves
// each projection it keeps in the file's quantisation as
//   M.weight             uint8 (out, bytes per row): the packed blocks, rows in Hugging Face order
//   M.weight.ggml_type   int32 (1): the ggml type number (ggml_types.h)
// Resuming reads them back bit for bit; `ferry export` and from_pretrained dequantise them (to
// float32; callers convert).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "src/io/ggml_tensor.h"
#include "src/io/safetensors.h"

namespace ferry::io {

class HfWeights;

// Adds `q` under `weight_name` (`M.weight`), on the CPU.
void add_ggml_tensors(TensorMap& tensors, const std::string& weight_name, const GgmlTensor& q);

// True when `tensors` holds a ggml weight (an `M.weight.ggml_type` entry).
bool has_ggml_tensors(const TensorMap& tensors);

// Removes every ggml weight from `tensors` and returns them by weight name. InputError naming
// `source` and the tensor when the blocks are missing, of another dtype or shape, or the type is one
// Ferry does not read.
std::map<std::string, GgmlTensor> take_ggml_tensors(TensorMap& tensors, const std::string& source);

// The ggml weight `weight_name` of a checkpoint folder (a view of the file), or nothing when it is
// not stored so. InputError as above.
std::optional<GgmlTensor> find_ggml_weight(const HfWeights& weights, const std::string& weight_name,
                                           const std::string& source);

// True for `M.weight.ggml_type`.
bool is_ggml_side_tensor(const std::string& name);

// Replaces every ggml weight by its dequantised float32 weight.
void dequantize_ggml_tensors(TensorMap& tensors, const std::string& source);

}  // namespace ferry::io
