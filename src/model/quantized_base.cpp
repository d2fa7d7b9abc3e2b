// The quantised base of a Llama model: quantise, load quantised, measure (see quantized_base.h).
#include "src/model/quantized_base.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "src/io/gguf_model.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_quantization.h"
#include "src/io/hf_tensor_specs.h"
#include "src/io/int8_checkpoint.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/family/model_tensors.h"
#include "src/model/ggml_linear.h"
#include "src/model/int8_linear.h"
#include "src/model/model_state.h"
#include "src/model/nf4_linear.h"

namespace ferry {
namespace {

// A Mixture of Experts' router (mlp.gate) stays in the compute dtype under every quantised base, as
// bitsandbytes' QLoRA recipes keep it: 4-bit router logits would move tokens to other experts.
bool is_router(const LayerProjection& p) { return p.name.ends_with(".gate"); }

std::string weight_name(int64_t layer, const std::string& projection) {
  return "model.layers." + std::to_string(layer) + "." + projection + ".weight";
}

bool quantized(const torch::nn::LinearImpl& linear) {
  return nf4_weight_of(linear) != nullptr || int8_weight_of(linear) != nullptr || ggml_weight_of(linear) != nullptr;
}

// ggml types a GGUF projection may keep as a float weight (converted to the run's dtype).
bool float_ggml_type(io::GgmlType type) {
  return type == io::GgmlType::f32 || type == io::GgmlType::f16 || type == io::GgmlType::bf16;
}

// Replaces `linear`'s float weight by `source` quantised into `kind`.
void quantize_linear(torch::nn::LinearImpl& linear, const torch::Tensor& source, BaseQuantization kind,
                     bool double_quant) {
  if (kind == BaseQuantization::int8) {
    if (source.sizes() != linear.weight.sizes()) {
      throw InputError(detail::concat("weight of shape ", source.sizes(), " does not fit the projection ",
                                      linear.weight.sizes()));
    }
    set_linear_int8(linear, kernels::int8_quantize_tensor(source.detach()));
  } else {
    quantize_linear_nf4(linear, source, double_quant);
  }
}

[[noreturn]] void throw_other_format(const std::string& source, const std::string& name, const char* stored,
                                     BaseQuantization kind) {
  throw ConfigError(detail::concat("lora.quantize_base ", enum_name(kind), ": ", source, " stores ", name,
                                   " (and the other projections) in ", stored, "; requantising it would stack two "
                                   "roundings: set lora.quantize_base=",
                                   std::string(stored) == "int8" ? "int8" : "nf4",
                                   " to use the weights as stored, or none to dequantise them"));
}

}  // namespace

void quantize_base(DecoderModelImpl& model, BaseQuantization kind, bool double_quant) {
  FERRY_CHECK(kind != BaseQuantization::none, "quantize_base: no format given");
  if (kind == BaseQuantization::gguf) {
    throw ConfigError("lora.quantize_base gguf keeps the projections of a GGUF model as its file stores them; this "
                      "model was not loaded from one: set model.path to a .gguf file (or ollama:NAME), or use "
                      "lora.quantize_base nf4 or int8");
  }
  torch::NoGradGuard no_grad;
  for (auto& layer : model.decoder_layers) {
    for (const LayerProjection& p : layer->projections()) {
      if (is_router(p)) continue;
      if (quantized(**p.linear)) throw UserError("the model's base is already quantised");
      quantize_linear(**p.linear, (*p.linear)->weight, kind, double_quant);
    }
  }
}

void dequantize_base(DecoderModelImpl& model) {
  for (auto& layer : model.decoder_layers) {
    for (const LayerProjection& p : layer->projections()) {
      if (nf4_weight_of(**p.linear) != nullptr) dequantize_linear_nf4(**p.linear);
      if (int8_weight_of(**p.linear) != nullptr) dequantize_linear_int8(**p.linear);
      if (ggml_weight_of(**p.linear) != nullptr) dequantize_linear_ggml(**p.linear);
    }
  }
}

CausalLM causal_lm_from_pretrained_quantized(const std::filesystem::path& dir, at::ScalarType dtype,
                                                     BaseQuantization kind, bool double_quant,
                                                     QuantizedLoadReport* report) {
  FERRY_CHECK(kind != BaseQuantization::none, "causal_lm_from_pretrained_quantized: no format given");
  if (!std::filesystem::is_directory(dir)) {
    throw InputError("model folder " + dir.string() + " does not exist (expected config.json and *.safetensors)");
  }
  const ModelShape config = io::read_hf_config(dir / "config.json");
  const bool folder_4bit = io::read_hf_quantization(dir / "config.json").nf4;
  const io::HfWeights weights(dir);  // mapped: a tensor is read when it is converted
  const std::string source = "model folder " + dir.string();
  const io::GgufWeights* gguf = weights.gguf();
  if (kind == BaseQuantization::gguf && gguf == nullptr) {
    throw ConfigError("lora.quantize_base gguf: " + source + " is not a GGUF model (it keeps no ggml blocks); set "
                      "model.path to a .gguf file or ollama:NAME, or use lora.quantize_base nf4 or int8 to quantise "
                      "this one");
  }
  // Layers are quantised as they are built, so the host holds about a byte per parameter at most.
  io::check_weights_match_config(config, weights, dir / "config.json");
  io::check_model_fits_host(config, 1, 0, "loading " + source + " with a quantised base");
  QuantizedLoadReport found;
  std::vector<std::string> missing;
  std::set<std::string> taken;  // tensors consumed here (projection weights and their quantised groups)
  const LayerBuiltHook quantize_layer = [&](DecoderLayerImpl& layer, int64_t index) {
    torch::NoGradGuard no_grad;
    for (const LayerProjection& p : layer.projections()) {
      if (is_router(p)) continue;
      const std::string name = weight_name(index, p.name);
      // Quantised in the file: taken as it is (an incomplete group is an InputError naming the tensor).
      std::optional<kernels::Nf4Tensor> nf4 = io::find_nf4_weight(weights, name, source);
      std::optional<kernels::Int8Tensor> int8 = io::find_int8_weight(weights, name, source, dtype);
      if (nf4 && kind != BaseQuantization::nf4) throw_other_format(source, name, "4-bit NF4", kind);
      if (int8 && kind != BaseQuantization::int8) throw_other_format(source, name, "int8", kind);
      try {
        // A GGUF model under lora.quantize_base gguf: the file's blocks as they are (rows in Hugging
        // Face order); an F32 / F16 / BF16 projection stays a float weight.
        if (kind == BaseQuantization::gguf && !float_ggml_type(gguf->source(name).type)) {
          const io::GgmlTensor q = gguf->packed(name);
          set_linear_ggml(**p.linear, q, dtype);
          ++found.stored;
          ++found.ggml_types[io::ggml_type_name(q.type)];
          taken.insert(name);
          continue;
        }
        if (kind == BaseQuantization::gguf) {
          found.kept_float.push_back(name);
          continue;
        }
        if (nf4) {
          nf4->packed = nf4->packed.clone();  // owned: the mapping goes away after loading
          nf4->absmax = nf4->absmax.clone();
          if (nf4->nested()) nf4->nested_absmax = nf4->nested_absmax.clone();
          set_linear_nf4(**p.linear, *nf4);
          found.stored_double_quant += nf4->nested();
        } else if (int8) {
          int8->cb = int8->cb.clone();
          int8->scb = int8->scb.clone();
          set_linear_int8(**p.linear, *int8);
        }
        if (nf4 || int8) {
          ++found.stored;
          for (const std::string& tensor : io::nf4_group_names(name)) taken.insert(tensor);
          taken.insert(name.substr(0, name.size() - 7) + ".SCB");  // int8: `<projection>.SCB`
          taken.insert(name.substr(0, name.size() - 7) + ".weight_format");
          continue;
        }
        if (!weights.contains(name)) {
          missing.push_back(name);
          continue;
        }
        const at::Tensor tensor = weights.tensor(name);
        if (!at::isFloatingType(tensor.scalar_type())) {
          throw InputError(detail::concat("stored as ", c10::toString(tensor.scalar_type()), " ", tensor.sizes(),
                                          ", neither a float weight nor a quantised one (no ",
                                          io::nf4_group_names(name).back(),
                                          "); the checkpoint is incomplete or in a format Ferry does not read"));
        }
        if (folder_4bit) {  // left unquantised by transformers (llm_int8_skip_modules): keep it so
          found.kept_float.push_back(name);
          continue;
        }
        quantize_linear(**p.linear, tensor.to(dtype), kind, double_quant);
        ++found.quantized;
        taken.insert(name);
      } catch (const InputError& e) {
        throw InputError(source + ": " + name + ": " + e.what());
      }
    }
#ifdef __GLIBC__
    // The layer's float weights were freed, but glibc keeps such chunks in its heap (between the
    // quantised tensors just allocated) once its mmap threshold has grown; hand the pages back so
    // the process's memory follows the live tensors.
    malloc_trim(0);
#endif
  };
  CausalLM model(config, quantize_layer);
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
    throw InputError(detail::concat(source, " lacks ", missing.size(), " projection weights to quantise: ", list));
  }
  model->to(dtype);  // the full-precision rest; quantised weights keep their format
  io::TensorMap rest;  // zero-copy views of everything but the projections handled above
  for (const std::string& name : weights.names()) {
    if (taken.count(name) == 0) rest.emplace(name, weights.tensor(name));
  }
  LoadStateOptions options;
  options.source = source;
  load_state(*model, rest, options);
  model->eval();
  if (report != nullptr) *report = std::move(found);
  return model;
}

std::map<std::string, uint64_t> gguf_projection_bytes(const std::filesystem::path& dir) {
  const io::HfWeights weights(dir);
  const io::GgufWeights* gguf = weights.gguf();
  if (gguf == nullptr) {
    throw ConfigError("lora.quantize_base gguf: model folder " + dir.string() + " is not a GGUF model; set model.path "
                      "to a .gguf file or ollama:NAME, or use lora.quantize_base nf4 or int8");
  }
  std::map<std::string, uint64_t> bytes;
  for (int64_t layer = 0; layer < gguf->config().num_hidden_layers; ++layer) {
    for (const ModelTensor& t : layer_tensors(gguf->config(), layer)) {
      if (t.lora_target.empty() || !t.name.ends_with(".weight")) continue;  // the projections' weights only
      const std::string& name = t.name;
      // An expert's share of its layer's stacked tensor (ffn_gate_exps etc.), else the whole tensor.
      if (!float_ggml_type(gguf->source(name).type)) bytes[name] = gguf->stored_bytes(name);
    }
  }
  return bytes;
}

QuantizedBaseSize quantized_base_size(const torch::nn::Module& model) {
  QuantizedBaseSize size;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    if (const auto* nf4 = dynamic_cast<const Nf4WeightImpl*>(module.get())) {
      ++size.projections;
      size.weights += nf4->quantized().numel();
      size.bytes += nf4->quantized().bytes();
    } else if (const auto* int8 = dynamic_cast<const Int8WeightImpl*>(module.get())) {
      ++size.projections;
      size.weights += int8->quantized().numel();
      size.bytes += int8->quantized().bytes();
    } else if (const auto* ggml = dynamic_cast<const GgmlWeightImpl*>(module.get())) {
      ++size.projections;
      size.weights += ggml->quantized().numel();
      size.bytes += ggml->quantized().bytes();
    }
  }
  return size;
}

}  // namespace ferry
