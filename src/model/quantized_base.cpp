// The NF4 base of a Llama model: quantise, load quantised, measure (see nf4_model.h).
#include "src/model/nf4_model.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <optional>
#include <set>
#include <vector>

#include "src/core/error.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_quantization.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/model_state.h"
#include "src/model/nf4_linear.h"

namespace ferry {
namespace {

struct NamedProjection {
  const char* name;  // under model.layers.<i>.
  torch::nn::LinearImpl* linear;
};

std::vector<NamedProjection> projections(LlamaDecoderLayerImpl& layer) {
  auto& a = *layer.self_attn;
  auto& m = *layer.mlp;
  return {{"self_attn.q_proj", a.q_proj.get()},  {"self_attn.k_proj", a.k_proj.get()},
          {"self_attn.v_proj", a.v_proj.get()},  {"self_attn.o_proj", a.o_proj.get()},
          {"mlp.gate_proj", m.gate_proj.get()}, {"mlp.up_proj", m.up_proj.get()},
          {"mlp.down_proj", m.down_proj.get()}};
}

std::string weight_name(int64_t layer, const char* projection) {
  return "model.layers." + std::to_string(layer) + "." + projection + ".weight";
}

}  // namespace

void quantize_base_nf4(LlamaModelImpl& model, bool double_quant) {
  torch::NoGradGuard no_grad;
  for (auto& layer : model.decoder_layers) {
    for (const NamedProjection& p : projections(*layer)) {
      if (nf4_weight_of(*p.linear) != nullptr) throw UserError("the model's base is already quantised to NF4");
      quantize_linear_nf4(*p.linear, p.linear->weight, double_quant);
    }
  }
}

void dequantize_base_nf4(LlamaModelImpl& model) {
  for (auto& layer : model.decoder_layers) {
    for (const NamedProjection& p : projections(*layer)) {
      if (nf4_weight_of(*p.linear) != nullptr) dequantize_linear_nf4(*p.linear);
    }
  }
}

LlamaForCausalLM causal_lm_from_pretrained_nf4(const std::filesystem::path& dir, at::ScalarType dtype,
                                               bool double_quant, Nf4LoadReport* report) {
  if (!std::filesystem::is_directory(dir)) {
    throw InputError("model folder " + dir.string() + " does not exist (expected config.json and *.safetensors)");
  }
  const LlamaConfig config = io::read_hf_config(dir / "config.json");
  const bool folder_4bit = io::read_hf_quantization(dir / "config.json").nf4;
  const io::HfWeights weights(dir);  // mapped: a tensor is read when it is converted
  const std::string source = "model folder " + dir.string();
  Nf4LoadReport found;
  std::vector<std::string> missing;
  std::set<std::string> taken;  // tensors consumed here (projection weights and their 4-bit groups)
  const LayerBuiltHook quantize_layer = [&](LlamaDecoderLayerImpl& layer, int64_t index) {
    torch::NoGradGuard no_grad;
    for (const NamedProjection& p : projections(layer)) {
      const std::string name = weight_name(index, p.name);
      // 4-bit in the file: taken as it is (an incomplete group is an InputError naming the tensor).
      std::optional<kernels::Nf4Tensor> stored = io::find_nf4_weight(weights, name, source);
      try {
        if (stored) {
          stored->packed = stored->packed.clone();  // owned: the mapping goes away after loading
          stored->absmax = stored->absmax.clone();
          if (stored->nested()) stored->nested_absmax = stored->nested_absmax.clone();
          set_linear_nf4(*p.linear, *stored);
          ++found.stored;
          found.stored_double_quant += stored->nested();
          for (const std::string& tensor : io::nf4_group_names(name)) taken.insert(tensor);
          continue;
        }
        if (!weights.contains(name)) {
          missing.push_back(name);
          continue;
        }
        const at::Tensor tensor = weights.tensor(name);
        if (!at::isFloatingType(tensor.scalar_type())) {
          throw InputError(detail::concat("stored as ", c10::toString(tensor.scalar_type()), " ", tensor.sizes(),
                                          ", neither a float weight nor a 4-bit one (no ",
                                          io::nf4_group_names(name).back(),
                                          "); the checkpoint is incomplete or in a format Ferry does not read"));
        }
        if (folder_4bit) {  // left unquantised by transformers (llm_int8_skip_modules): keep it so
          found.kept_float.push_back(name);
          continue;
        }
        quantize_linear_nf4(*p.linear, tensor.to(dtype), double_quant);
        ++found.quantized;
        taken.insert(name);
      } catch (const InputError& e) {
        throw InputError(source + ": " + name + ": " + e.what());
      }
    }
#ifdef __GLIBC__
    // The layer's float weights were freed, but glibc keeps such chunks in its heap (between the
    // 4-bit tensors just allocated) once its mmap threshold has grown; hand the pages back so the
    // process's memory follows the live tensors.
    malloc_trim(0);
#endif
  };
  LlamaForCausalLM model(config, quantize_layer);
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
    throw InputError(detail::concat(source, " lacks ", missing.size(), " projection weights to quantise: ", list));
  }
  model->to(dtype);  // the full-precision rest; NF4 weights keep their format
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

Nf4BaseSize nf4_base_size(const torch::nn::Module& model) {
  Nf4BaseSize size;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    const auto* nf4 = dynamic_cast<const Nf4WeightImpl*>(module.get());
    if (nf4 == nullptr) continue;
    ++size.projections;
    size.weights += nf4->quantized().numel();
    size.bytes += nf4->quantized().bytes();
  }
  return size;
}

}  // namespace ferry
