// QLoRA's 4-bit base for a whole Llama model: which weights are quantised (the seven projections
// of every decoder layer, targeted by LoRA or not; embeddings, norms, biases and the heads stay in
// full precision), loading a Hugging Face folder with them quantised one tensor at a time, and
// what the quantised base costs. The projection itself is src/model/nf4_linear.h.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "src/model/llama_heads.h"

namespace ferry {

// Quantises every decoder projection of `model` from its current float weight (a model built from
// scratch, or loaded in full precision). Throws UserError when some are quantised already.
void quantize_base_nf4(LlamaModelImpl& model, bool double_quant);

// What causal_lm_from_pretrained_nf4 found in the folder, for the caller's notes.
struct Nf4LoadReport {
  int64_t quantized = 0;  // projections quantised from full-precision weights (with double_quant as asked)
  int64_t stored = 0;     // projections stored in 4 bits (a bitsandbytes or Ferry QLoRA checkpoint), taken as they are
  int64_t stored_double_quant = 0;         // of those, double-quantised
  std::vector<std::string> kept_float;     // stored in full precision in a 4-bit folder: left so
  bool stored_double_quant_differs(bool asked) const { return stored > 0 && stored_double_quant != (asked ? stored : 0); }
};

// As causal_lm_from_pretrained (pretrained.h) with the projections in NF4: each layer's
// projections are quantised from the mapped safetensors right after the layer is built (its float
// weights then released), so the full-precision model never exists at once. The host peak is the
// NF4 layers + the full-precision embeddings, norms and head in `dtype` + one layer's projections
// in fp32 (as built) + one projection converted to `dtype`. Each weight is converted to `dtype`
// before quantising (the quant state records it), as transformers loads with torch_dtype first.
//
// A folder that stores projections in 4 bits (bitsandbytes' `save_pretrained` of a 4-bit model,
// src/io/hf_quantization.h; or a Ferry QLoRA checkpoint) follows the file: each stored NF4 weight
// goes into its Nf4Weight bit for bit (no dequantise/requantise), with its own blocksize, double
// quantisation and dtype, whatever `double_quant` asks (that applies only to weights quantised
// here); a projection such a folder stores in full precision (transformers'
// llm_int8_skip_modules) stays full precision, as transformers runs it. `report` (optional) says
// what was found.
LlamaForCausalLM causal_lm_from_pretrained_nf4(const std::filesystem::path& dir, at::ScalarType dtype,
                                               bool double_quant, Nf4LoadReport* report = nullptr);

// Undoes quantize_base_nf4: every NF4 projection gets its dequantised float weight back (frozen).
void dequantize_base_nf4(LlamaModelImpl& model);

struct Nf4BaseSize {
  int64_t projections = 0;  // quantised
  int64_t weights = 0;      // elements they hold
  int64_t bytes = 0;        // packed codes + scales
  double bytes_per_weight() const { return weights > 0 ? static_cast<double>(bytes) / weights : 0.0; }
};
Nf4BaseSize nf4_base_size(const torch::nn::Module& model);

}  // namespace ferry
