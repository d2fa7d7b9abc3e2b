// The NF4 base of a Llama model: quantise, load quantised, measure (see nf4_model.h).
#include "src/model/nf4_model.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <set>
#include <vector>

#include "src/core/error.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
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
                                               bool double_quant) {
  if (!std::filesystem::is_directory(dir)) {
    throw InputError("model folder " + dir.string() + " does not exist (expected config.json and *.safetensors)");
  }
  const LlamaConfig config = io::read_hf_config(dir / "config.json");
  const io::HfWeights weights(dir);  // mapped: a tensor is read when it is converted
  std::vector<std::string> missing;
  std::set<std::string> quantised;
  const LayerBuiltHook quantize_layer = [&](LlamaDecoderLayerImpl& layer, int64_t index) {
    torch::NoGradGuard no_grad;
    for (const NamedProjection& p : projections(layer)) {
      const std::string name = weight_name(index, p.name);
      if (!weights.contains(name)) {
        missing.push_back(name);
        continue;
      }
      try {
        quantize_linear_nf4(*p.linear, weights.tensor(name).to(dtype), double_quant);
        quantised.insert(name);
      } catch (const InputError& e) {
        throw InputError("model folder " + dir.string() + ": " + name + ": " + e.what());
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
    throw InputError(detail::concat("model folder ", dir.string(), " lacks ", missing.size(),
                                    " projection weights to quantise: ", list));
  }
  model->to(dtype);  // the full-precision rest; NF4 weights keep their format
  io::TensorMap rest;  // zero-copy views of everything but the quantised projections
  for (const std::string& name : weights.names()) {
    if (quantised.count(name) == 0) rest.emplace(name, weights.tensor(name));
  }
  LoadStateOptions options;
  options.source = "model folder " + dir.string();
  load_state(*model, rest, options);
  model->eval();
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
