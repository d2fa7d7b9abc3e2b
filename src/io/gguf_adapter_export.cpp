// The GGUF LoRA adapter export (see gguf_adapter_export.h): a checkpoint's lora_A / lora_B pairs
// under llama.cpp's tensor names, in its layout and types, with the adapter metadata.
#include "src/io/gguf_adapter_export.h"

#include <ATen/ATen.h>

#include <map>
#include <vector>

#include "core/error.h"
#include "src/io/ggml_quantize.h"
#include "src/io/gguf_export.h"
#include "src/io/gguf_writer.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/model/family/model_family.h"
#include "src/io/hf_export.h"
#include "src/io/lora_adapter.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kLoraA = ".lora_A.weight";
constexpr std::string_view kLoraB = ".lora_B.weight";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The adapters llama.cpp can apply: a decoder layer's matrix (blk.N.*.weight, 2-D).
// An expert's projection is not: it is one slice of a stacked ffn_*_exps tensor, whose adapter would
// be stacked too, which Ferry does not write.
bool adaptable(const GgufTensorLayout& layout) {
  return layout.expert < 0 && layout.gguf_name.starts_with("blk.") && layout.gguf_name.ends_with(".weight") &&
         layout.shape.size() == 2;
}

struct AdaptedWeight {
  const GgufTensorLayout* layout;
  std::string a_name, b_name;  // the checkpoint's lora_A / lora_B names
};

}  // namespace

fs::path gguf_adapter_output_file(const fs::path& output) {
  if (output.extension() == ".gguf" && !fs::is_directory(output)) return output;
  return output / "adapter.gguf";
}

GgufAdapterExportSummary export_gguf_adapter(const GgufAdapterExportOptions& options) {
  const fs::path& in = options.checkpoint;
  if (is_llama_quantize_type(options.type)) {
    throw UserError("--gguf-type " + gguf_file_type_name(options.type) + " is llama-quantize's mix for a whole model; "
                    "a LoRA adapter is written as f32, f16, bf16 or q8_0 (llama.cpp applies it to a quantised base: "
                    "export the base with --lora none --gguf-type " + gguf_file_type_name(options.type) + ")");
  }
  if (!fs::is_directory(in)) {
    throw InputError("checkpoint folder '" + in.string() + "' does not exist or is not a folder");
  }
  if (!fs::exists(in / "config.json")) {
    throw InputError("checkpoint folder '" + in.string() + "' has no config.json; pass a Ferry LoRA checkpoint "
                     "(output.dir/step-N of a run with lora.rank > 0)");
  }
  const ModelShape config = read_hf_config(in / "config.json");
  const ModelFamily& family = family_of(config);
  const std::string arch = family.gguf_architecture;  // as gguf_export.h
  if (arch.empty()) {
    throw UserError("GGUF export: llama.cpp has no architecture for model_type '" + config.model_type + "' ('" +
                    in.string() + "/config.json'); export the adapter with --format hf --lora adapter");
  }
  if (family.write_gguf != nullptr) family.write_gguf(config);  // llama.cpp must run the base as transformers does
  const HfWeights weights(in);
  if (read_hf_head(in / "config.json") == HfHead::score || weights.contains("score.weight")) {
    throw InputError("checkpoint '" + in.string() + "' has a score head (a reward model or critic): llama.cpp applies "
                     "LoRA adapters to causal language models only; export it with --format hf --lora adapter "
                     "(a PEFT adapter) instead");
  }
  if (!checkpoint_has_lora(in, weights)) {
    throw InputError("checkpoint '" + in.string() + "' has no LoRA weights (lora_A / lora_B) to write as an adapter: "
                     "the run trained without LoRA (lora.rank 0); export the whole model with --format gguf "
                     "(--lora merged, the default), or train with lora.rank > 0");
  }
  check_lora_checkpoint(in, weights);
  const LoraAdapterConfig adapter = read_adapter_config(in / kAdapterConfigFile);

  // Every lora_A / lora_B pair must adapt a matrix llama.cpp has, with shapes that fit it.
  const std::vector<GgufTensorLayout> layouts = gguf_tensor_layouts(config);
  std::map<std::string, const GgufTensorLayout*> by_hf_name;
  for (const GgufTensorLayout& layout : layouts) by_hf_name[layout.hf_name] = &layout;
  std::map<std::string, AdaptedWeight> adapted;  // by base weight name
  for (const std::string& name : weights.names()) {
    if (!is_lora_tensor(name)) {
      if (name.find("lora_") != std::string::npos) {
        throw InputError("checkpoint '" + in.string() + "': weight '" + name + "' looks like a LoRA weight but is not "
                         "named '<module>.lora_A.weight' / '.lora_B.weight'; llama.cpp adapters need those pairs");
      }
      continue;
    }
    const std::string projection = name.substr(0, name.size() - kLoraA.size());
    const std::string base = projection + ".weight";
    const auto layout = by_hf_name.find(base);
    if (layout == by_hf_name.end() || !adaptable(*layout->second)) {
      throw InputError("checkpoint '" + in.string() + "': LoRA weight '" + name + "' adapts '" + base + "', which " +
                       "llama.cpp cannot map to a tensor of its " + arch + " model (a GGUF adapter covers the " +
                       "decoder layers' projections: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, or Phi-3's qkv_proj "
                       "and gate_up_proj; not a Mixture of Experts' experts, stacked in llama.cpp); " +
                       "export the model with the adapters merged instead (--format gguf --lora merged)");
    }
    AdaptedWeight& entry = adapted[base];
    entry.layout = layout->second;
    (name.ends_with(kLoraA) ? entry.a_name : entry.b_name) = name;
  }
  for (const auto& [base, entry] : adapted) {
    const std::string projection = base.substr(0, base.size() - std::string(".weight").size());
    if (entry.a_name.empty() || entry.b_name.empty()) {
      const std::string& have = entry.a_name.empty() ? entry.b_name : entry.a_name;
      throw InputError("checkpoint '" + in.string() + "': LoRA weight '" + have + "' has no partner '" + projection +
                       std::string(entry.a_name.empty() ? kLoraA : kLoraB) + "'");
    }
    const TensorInfo& a = weights.info(entry.a_name);
    const TensorInfo& b = weights.info(entry.b_name);
    const std::vector<int64_t>& w = entry.layout->shape;  // (out, in), from config.json
    const std::vector<int64_t> want_a{adapter.rank, w[1]}, want_b{w[0], adapter.rank};
    if (a.shape != want_a || b.shape != want_b) {
      throw InputError("checkpoint '" + in.string() + "': LoRA weights of '" + projection + "' have shapes A " +
                       shape_text(a.shape) + ", B " + shape_text(b.shape) + "; base " + shape_text(w) + " and " +
                       kAdapterConfigFile + "'s r " + std::to_string(adapter.rank) + " need A " + shape_text(want_a) +
                       ", B " + shape_text(want_b));
    }
    if (!at::isFloatingType(a.dtype) || !at::isFloatingType(b.dtype)) {
      throw InputError("checkpoint '" + in.string() + "': LoRA weights of '" + projection + "' are not floating point");
    }
  }

  GgufAdapterExportSummary summary;
  summary.architecture = arch;
  summary.name = options.name.empty() ? default_gguf_name(in) : options.name;
  summary.rank = adapter.rank;
  summary.alpha = adapter.alpha;
  summary.projections = static_cast<int64_t>(adapted.size());

  GgufWriter writer;  // metadata in convert_lora_to_gguf.py's order
  writer.add_string("general.architecture", arch);
  writer.add_string("general.type", "adapter");
  writer.add_string("adapter.type", "lora");
  writer.add_string("general.name", summary.name);
  writer.add_float32("adapter.lora.alpha", static_cast<float>(adapter.alpha));
  writer.add_uint32("general.quantization_version", 2);

  const auto add = [&](const std::string& name, const std::string& source, GgmlType type, int64_t groups) {
    const TensorInfo& info = weights.info(source);
    ++summary.tensor_types[ggml_type_name(type)];
    writer.add_tensor(name, info.shape, type, [&weights, source, type, groups] {
      at::Tensor value = weights.tensor(source);  // a view of the mapped file
      if (groups > 0) value = permute_gguf_rows(value, groups);
      return to_ggml(value, type);
    });
  };
  for (const GgufTensorLayout& layout : layouts) {  // the model export's order
    const auto found = adapted.find(layout.hf_name);
    if (found == adapted.end()) continue;
    const AdaptedWeight& entry = found->second;
    const int64_t groups = layout.permutation == GgufRowPermutation::none ? 0 : layout.groups;
    add(layout.gguf_name + ".lora_a", entry.a_name, gguf_tensor_type(options.type, weights.info(entry.a_name).shape), 0);
    add(layout.gguf_name + ".lora_b", entry.b_name, gguf_tensor_type(options.type, weights.info(entry.b_name).shape),
        groups);
  }

  summary.file = gguf_adapter_output_file(options.output);
  summary.tensors = writer.tensor_count();
  summary.file_bytes = writer.write(summary.file);
  return summary;
}

}  // namespace ferry::io
