// QLoRA's quantised frozen base for a whole Llama model, NF4 (src/model/nf4_linear.h), int8
// (src/model/int8_linear.h) or, for a GGUF model, the file's own ggml blocks (src/model/ggml_linear.h):
// which weights are quantised (the seven projections of every decoder
// layer, targeted by LoRA or not; embeddings, norms, biases and the heads stay in full precision),
// loading a Hugging Face folder with them quantised one tensor at a time (or taken as stored when
// the folder holds them quantised already), and what the quantised base costs.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/config/config_enum.h"
#include "src/model/model_heads.h"

namespace ferry {

// Quantises every decoder projection of `model` from its current float weight (a model built from
// scratch, or loaded in full precision) into `kind` (nf4 or int8; `double_quant` for nf4). Throws
// UserError when some are quantised already, ConfigError for gguf (only a GGUF file has its blocks).
void quantize_base(DecoderModelImpl& model, BaseQuantization kind, bool double_quant);

// What causal_lm_from_pretrained_quantized found in the folder, for the caller's notes.
struct QuantizedLoadReport {
  int64_t quantized = 0;  // projections quantised from full-precision weights (with double_quant as asked)
  int64_t stored = 0;     // projections stored quantised in the wanted format, taken as they are
  int64_t stored_double_quant = 0;      // of those, double-quantised NF4
  std::vector<std::string> kept_float;  // stored in full precision in a 4-bit folder or GGUF: left so
  std::map<std::string, int64_t> ggml_types;  // gguf: projections kept per ggml type ("Q4_K": 12)
  bool stored_double_quant_differs(bool asked) const { return stored > 0 && stored_double_quant != (asked ? stored : 0); }
};

// As causal_lm_from_pretrained (pretrained.h) with the projections in `kind` (nf4 or int8): each
// layer's projections are quantised from the mapped safetensors right after the layer is built
// (its float weights then released), so the full-precision model never exists at once. The host
// peak is the quantised layers + the full-precision embeddings, norms and head in `dtype` + one
// layer's projections in fp32 (as built) + one projection converted to `dtype`. Each weight is
// converted to `dtype` before quantising (an NF4 quant state records it), as transformers loads
// with torch_dtype first.
//
// A folder that stores projections quantised already follows the file. NF4 (bitsandbytes'
// `save_pretrained` of a 4-bit model, src/io/hf_quantization.h; or a Ferry QLoRA checkpoint): each
// stored weight goes into its Nf4Weight bit for bit (no dequantise/requantise), with its own
// blocksize, double quantisation and dtype, whatever `double_quant` asks (that applies only to
// weights quantised here); a projection such a folder stores in full precision (transformers'
// llm_int8_skip_modules) stays full precision, as transformers runs it. Int8 (a Ferry checkpoint of
// an int8 run): taken as stored. A folder stored in the other format is a ConfigError naming
// lora.quantize_base (requantising would stack two roundings). `report` (optional) says what was
// found.
//
// `kind` gguf needs a GGUF model's folder (src/io/model_path.h; ConfigError otherwise): each
// projection keeps the file's ggml blocks as they are (GgmlWeight, rows put in Hugging Face order),
// one F32 / F16 / BF16 in the file stays a float weight in `dtype`. nf4 and int8 on a GGUF model
// quantise its dequantised weights.
CausalLM causal_lm_from_pretrained_quantized(const std::filesystem::path& dir, at::ScalarType dtype,
                                                     BaseQuantization kind, bool double_quant,
                                                     QuantizedLoadReport* report = nullptr);

// Undoes quantize_base: every quantised projection gets its dequantised float weight back (frozen).
void dequantize_base(DecoderModelImpl& model);

// lora.quantize_base gguf on the GGUF model folder `dir` (model_path.h): the bytes of each decoder
// projection kept in the file's ggml blocks, by Hugging Face weight name (the plan counts them as
// stored; F32 / F16 / BF16 projections are not listed). ConfigError when `dir` is not a GGUF model.
std::map<std::string, uint64_t> gguf_projection_bytes(const std::filesystem::path& dir);

struct QuantizedBaseSize {
  int64_t projections = 0;  // quantised (NF4 or int8)
  int64_t weights = 0;      // elements they hold
  int64_t bytes = 0;        // codes + scales
  double bytes_per_weight() const { return weights > 0 ? static_cast<double>(bytes) / weights : 0.0; }
};
QuantizedBaseSize quantized_base_size(const torch::nn::Module& model);

// NF4 shorthands (QLoRA's usual form).
inline void quantize_base_nf4(DecoderModelImpl& model, bool double_quant) {
  quantize_base(model, BaseQuantization::nf4, double_quant);
}
inline CausalLM causal_lm_from_pretrained_nf4(const std::filesystem::path& dir, at::ScalarType dtype,
                                                      bool double_quant, QuantizedLoadReport* report = nullptr) {
  return causal_lm_from_pretrained_quantized(dir, dtype, BaseQuantization::nf4, double_quant, report);
}
using Nf4BaseSize = QuantizedBaseSize;
inline Nf4BaseSize nf4_base_size(const torch::nn::Module& model) { return quantized_base_size(model); }

}  // namespace ferry
