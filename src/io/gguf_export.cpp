// The GGUF export (see gguf_export.h): config.json -> metadata, weights -> llama.cpp's names,
// layout and types, tokenizer files -> tokenizer.* keys, all into one GgufWriter.
#include "src/io/gguf_export.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/ggml_checkpoint.h"
#include "src/io/ggml_quantize.h"
#include "src/io/gguf_quant_mix.h"
#include "src/io/gguf_tensor_layout.h"
#include "src/io/gguf_tokenizer.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_export.h"
#include "src/io/int8_checkpoint.h"
#include "src/io/lora_adapter.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/family/model_family.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

// llama3 rope: one factor per rotary frequency, computed in float32 as convert_hf_to_gguf.py
// computes them (DecoderModel.generate_extra_tensors), op for op.
at::Tensor llama3_rope_factors(const ModelShape& c) {
  const RopeScaling& s = c.rope_scaling;
  const at::Tensor exponent = at::arange(0, c.head_dim, 2, at::kFloat) / c.head_dim;
  const at::Tensor freqs = at::reciprocal(at::pow(c.rope_theta, exponent));  // 1.0 / base ** exponent
  const auto f32 = [](double v) { return static_cast<float>(v); };
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const float low_wavelen = f32(old_context / s.low_freq_factor), high_wavelen = f32(old_context / s.high_freq_factor);
  const float two_pi = f32(2.0 * M_PI);
  at::Tensor factors = at::empty({freqs.numel()}, at::kFloat);
  const float* freq = freqs.data_ptr<float>();
  float* out = factors.data_ptr<float>();
  for (int64_t i = 0; i < freqs.numel(); ++i) {
    const float wavelen = (1.0f / freq[i]) * two_pi;  // 2 * math.pi / freq
    if (wavelen < high_wavelen) {
      out[i] = 1.0f;
    } else if (wavelen > low_wavelen) {
      out[i] = f32(s.factor);
    } else {
      const float smooth = ((1.0f / wavelen) * f32(old_context) - f32(s.low_freq_factor)) /
                           f32(s.high_freq_factor - s.low_freq_factor);
      out[i] = 1.0f / ((1.0f - smooth) / f32(s.factor) + smooth);
    }
  }
  return factors;
}

bool config_has_head_dim(const fs::path& config_json) {
  const nlohmann::json root = nlohmann::json::parse(read_file(config_json), nullptr, /*allow_exceptions=*/false);
  return root.is_object() && root.contains("head_dim") && !root["head_dim"].is_null();
}

// config.json's sliding_window (Mistral), 0 when absent or null.
int64_t config_sliding_window(const fs::path& config_json) {
  const nlohmann::json root = nlohmann::json::parse(read_file(config_json), nullptr, /*allow_exceptions=*/false);
  if (!root.is_object() || !root.contains("sliding_window") || !root["sliding_window"].is_number_integer()) return 0;
  return root["sliding_window"].get<int64_t>();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Weights Ferry's checkpoints or transformers may carry that llama.cpp does not use.
bool ignored_weight(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

// One tensor of the file: a weight, or a layer's experts stacked as the converter merges them
// (parts[e] is expert e's layout; gguf_tensor_layout.h).
struct FileTensor {
  std::string gguf_name;
  std::vector<int64_t> shape;  // torch order; (experts, rows, columns) for a stack
  std::vector<const GgufTensorLayout*> parts;
};

std::vector<FileTensor> file_tensors(const std::vector<GgufTensorLayout>& planned) {
  std::vector<FileTensor> out;
  std::map<std::string, size_t> stacks;  // gguf name -> index in out
  for (const GgufTensorLayout& layout : planned) {
    if (layout.expert < 0) {
      out.push_back({layout.gguf_name, layout.shape, {&layout}});
      // Qwen2-MoE's shared expert gate, (1, hidden): written 1-D, (hidden), as llama.cpp's loader asks
      // for it ({n_embd}) and transformers' GGUF loader needs it (it adds the leading 1 itself); the
      // converter writes (1, hidden), which llama.cpp reads as the same tensor.
      if (layout.gguf_name.ends_with(".ffn_gate_inp_shexp.weight")) out.back().shape = {layout.shape.back()};
      continue;
    }
    const auto [it, added] = stacks.emplace(layout.gguf_name, out.size());
    if (added) {
      out.push_back({layout.gguf_name, layout.file_shape(),
                     std::vector<const GgufTensorLayout*>(static_cast<size_t>(layout.experts), nullptr)});
    }
    out[it->second].parts.at(static_cast<size_t>(layout.expert)) = &layout;
  }
  for (const FileTensor& tensor : out) {
    for (const GgufTensorLayout* part : tensor.parts) {
      FERRY_CHECK(part != nullptr, "GGUF export: ", tensor.gguf_name, " lacks an expert in the tensor list");
    }
  }
  return out;
}

}  // namespace

fs::path gguf_output_file(const fs::path& output) {
  if (output.extension() == ".gguf" && !fs::is_directory(output)) return output;
  return output / "model.gguf";
}

std::string default_gguf_name(const fs::path& checkpoint) {
  fs::path absolute = fs::absolute(checkpoint).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // "run/final/", "." -> no trailing "/"
  const std::string name = absolute.filename().string();
  const bool ferry_name = name == "final" || (name.starts_with("step-") && name.size() > 5);
  const std::string parent = absolute.parent_path().filename().string();
  if (ferry_name && !parent.empty()) return parent + "-" + name;
  return name.empty() ? "model" : name;
}

GgufExportSummary export_gguf_model(const GgufExportOptions& options) {
  const fs::path& in = options.checkpoint;
  if (!fs::is_directory(in)) {
    throw InputError("checkpoint folder '" + in.string() + "' does not exist or is not a folder");
  }
  if (!fs::exists(in / "config.json")) {
    throw InputError("checkpoint folder '" + in.string() + "' has no config.json; pass a Hugging Face model folder "
                     "or a Ferry checkpoint (output.dir/step-N or output.dir/final)");
  }
  const ModelShape config = read_hf_config(in / "config.json");
  // The family's llama.cpp architecture (Mistral is a Llama there: its converter registers
  // MistralForCausalLM as DecoderModel).
  const ModelFamily& family = family_of(config);
  const std::string arch = family.gguf_architecture;
  if (arch.empty()) {
    throw UserError("GGUF export: llama.cpp has no architecture for model_type '" + config.model_type + "' ('" +
                    in.string() + "/config.json'); export it with --format hf");
  }
  const std::vector<GgufKey> family_keys = family.write_gguf != nullptr ? family.write_gguf(config) : std::vector<GgufKey>{};
  if (read_hf_head(in / "config.json") == HfHead::score) {
    throw UserError("'" + in.string() + "' is a sequence-classification (reward) model; GGUF export writes causal "
                    "language models (export it with --format hf instead)");
  }
  if (config.rope_scaling.type == RopeScalingType::llama3 && !family.gguf_permutes_qk) {
    throw UserError("'" + in.string() + "/config.json': llama3 rope scaling with model_type " + arch +
                    " has no llama.cpp equivalent (llama.cpp applies llama3 frequency factors to the llama "
                    "architecture only)");
  }
  if (config.rope_scaling.type == RopeScalingType::longrope && arch != "phi3") {
    throw UserError("'" + in.string() + "/config.json': LongRoPE (rope_type longrope) with model_type " +
                    config.model_type + " has no llama.cpp equivalent (llama.cpp reads LongRoPE factors for phi3 only)");
  }
  if (config.rope_scaling.type == RopeScalingType::yarn) {
    throw UserError("'" + in.string() + "/config.json': YaRN rope scaling is not written to GGUF yet (llama.cpp's "
                    "rope.scaling.type yarn keys); export it with --format hf");
  }
  if (config.head_dim % 2 != 0) {
    throw InputError("'" + in.string() + "/config.json': head_dim " + std::to_string(config.head_dim) +
                     " is odd; rotary embeddings need an even head_dim");
  }

  const HfWeights weights(in);
  if (weights.contains("score.weight")) {
    throw UserError("'" + in.string() + "' has a score head (score.weight): a reward model or critic; GGUF export "
                    "writes causal language models (export it with --format hf instead)");
  }
  const bool lora = checkpoint_has_lora(in, weights);
  double lora_scaling = 0.0;
  std::set<std::string> adapted;  // base weights with a LoRA pair
  if (lora) {
    check_lora_checkpoint(in, weights);
    lora_scaling = read_adapter_config(in / kAdapterConfigFile).scaling();
    for (const auto& name : weights.names()) {
      if (!is_lora_tensor(name)) continue;
      const std::string projection = name.substr(0, name.size() - std::string(".lora_A.weight").size());
      const bool is_a = name.ends_with(".lora_A.weight");
      const std::string partner = projection + (is_a ? ".lora_B.weight" : ".lora_A.weight");
      if (!weights.contains(partner)) throw InputError("LoRA weight '" + name + "' has no '" + partner + "'");
      if (!weights.contains(projection + ".weight")) {
        throw InputError("LoRA weight '" + name + "' has no base weight '" + projection + ".weight'");
      }
      adapted.insert(projection + ".weight");
    }
    if (!options.merge_lora) adapted.clear();  // --lora none: the base weights as they are
  }

  // Match the checkpoint's weights against what the config needs, before anything is written.
  const std::vector<GgufTensorLayout> planned = gguf_tensor_layouts(config);
  std::set<std::string> used;
  for (const GgufTensorLayout& tensor : planned) {
    if (!weights.contains(tensor.hf_name)) {
      throw InputError("checkpoint '" + in.string() + "' has no weight '" + tensor.hf_name + "', which config.json (" +
                       arch + ", " + std::to_string(config.num_hidden_layers) + " layers) needs");
    }
    // A QLoRA checkpoint's 4-bit projection (nf4_checkpoint.h): its quant state gives shape and dtype.
    const std::optional<kernels::Nf4Tensor> nf4 = find_nf4_weight(weights, tensor.hf_name, "checkpoint '" + in.string() + "'");
    // A GGUF base's projection (ggml_checkpoint.h): blocks, whose type gives the shape.
    const std::optional<GgmlTensor> ggml = find_ggml_weight(weights, tensor.hf_name, "checkpoint '" + in.string() + "'");
    const std::vector<int64_t>& shape = nf4 ? nf4->shape : ggml ? ggml->shape : weights.info(tensor.hf_name).shape;
    if (shape != tensor.shape) {
      throw InputError("checkpoint '" + in.string() + "': weight '" + tensor.hf_name + "' has shape " +
                       shape_text(shape) + ", config.json implies " + shape_text(tensor.shape));
    }
    const bool int8 = find_int8_weight(weights, tensor.hf_name, "checkpoint '" + in.string() + "'").has_value();
    const at::ScalarType dtype = nf4 ? nf4->dtype : int8 || ggml ? at::kFloat : weights.info(tensor.hf_name).dtype;
    if (!at::isFloatingType(dtype)) {
      throw InputError("checkpoint '" + in.string() + "': weight '" + tensor.hf_name + "' is not floating point");
    }
    used.insert(tensor.hf_name);
  }
  for (const auto& name : weights.names()) {
    if (used.count(name) || is_lora_tensor(name) || ignored_weight(name) || is_nf4_side_tensor(name) ||
        is_int8_side_tensor(name) || is_ggml_side_tensor(name)) {
      continue;
    }
    if (name == "lm_head.weight" && config.tie_word_embeddings) continue;  // tied: llama.cpp reuses token_embd
    throw InputError("checkpoint '" + in.string() + "': weight '" + name + "' has no place in a GGUF " + arch +
                     " model as its family describes it");
  }

  GgufExportSummary summary;
  summary.architecture = arch;
  summary.lora_merged = lora && options.merge_lora;
  summary.lora_left_out = lora && !options.merge_lora;
  summary.vocab_size = config.vocab_size;
  summary.name = options.name.empty() ? default_gguf_name(in) : options.name;
  const GgufVocab vocab = read_gguf_vocab(in, config.vocab_size, options.pre);
  summary.tokenizer = vocab.model == "llama" ? "llama (SentencePiece)" : "gpt2 (byte-level BPE, pre " + vocab.pre + ")";
  summary.warnings = vocab.warnings;
  if (const int64_t window = config_sliding_window(in / "config.json");
      (config.model_type == "mistral" || config.model_type == "mixtral") && window > 0 &&
      window < config.max_position_embeddings) {
    summary.warnings.push_back("config.json: sliding_window " + std::to_string(window) +
                               " is not carried over: llama.cpp's llama architecture attends to the whole context (as "
                               "its converter writes Mistral)");
  }
  if (config.model_type == "phi3" && config.sliding_window > 0 && config.sliding_window < config.max_position_embeddings) {
    summary.warnings.push_back("config.json: sliding_window " + std::to_string(config.sliding_window) +
                               " is written, but llama.cpp's phi3 disables it (\"Phi SWA is currently disabled\") and "
                               "attends to the whole context: past that many tokens its output differs from "
                               "transformers'");
  }

  GgufWriter writer;
  writer.add_string("general.architecture", arch);
  writer.add_string("general.type", "model");
  writer.add_string("general.name", summary.name);
  writer.add_uint32("general.alignment", kGgufAlignment);
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  writer.add_uint32(arch + ".context_length", u32(config.max_position_embeddings));
  writer.add_uint32(arch + ".embedding_length", u32(config.hidden_size));
  writer.add_uint32(arch + ".block_count", u32(config.num_hidden_layers));
  writer.add_uint32(arch + ".feed_forward_length", u32(config.intermediate_size));
  writer.add_uint32(arch + ".attention.head_count", u32(config.num_attention_heads));
  writer.add_uint32(arch + ".attention.head_count_kv", u32(config.num_key_value_heads));
  writer.add_float32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(config.rms_norm_eps));
  writer.add_float32(arch + ".rope.freq_base", static_cast<float>(config.rope_theta));
  writer.add_uint32(arch + ".rope.dimension_count", u32(config.rotary_dim()));
  if (config_has_head_dim(in / "config.json") || config.head_dim * config.num_attention_heads != config.hidden_size) {
    writer.add_uint32(arch + ".attention.key_length", u32(config.head_dim));
    writer.add_uint32(arch + ".attention.value_length", u32(config.head_dim));
  }
  writer.add_uint32(arch + ".vocab_size", u32(config.vocab_size));
  if (config.rope_scaling.type == RopeScalingType::linear) {
    writer.add_string(arch + ".rope.scaling.type", "linear");
    writer.add_float32(arch + ".rope.scaling.factor", static_cast<float>(config.rope_scaling.factor));
  }
  for (const GgufKey& key : family_keys) {
    if (key.type == GgufKey::Type::u32) {
      writer.add_uint32(arch + "." + key.key, u32(static_cast<int64_t>(key.value)));
    } else if (key.type == GgufKey::Type::bool_array) {
      writer.add_bool_array(arch + "." + key.key, key.flags);
    } else {
      writer.add_float32(arch + "." + key.key, static_cast<float>(key.value));
    }
  }
  writer.add_uint32("general.file_type", gguf_file_type_id(options.type));
  writer.add_uint32("general.quantization_version", 2);
  add_gguf_vocab(writer, vocab);

  const auto count = [&](GgmlType type) { ++summary.tensor_types[ggml_type_name(type)]; };
  if (config.rope_scaling.type == RopeScalingType::llama3) {
    writer.add_tensor("rope_freqs.weight", {config.head_dim / 2}, GgmlType::f32,
                      [&config] { return llama3_rope_factors(config); });
    count(GgmlType::f32);
  }
  if (config.rope_scaling.type == RopeScalingType::longrope) {  // llama.cpp's phi3 reads them as tensors
    for (const auto* factors : {&config.rope_scaling.long_factor, &config.rope_scaling.short_factor}) {
      const char* name = factors == &config.rope_scaling.long_factor ? "rope_factors_long.weight" : "rope_factors_short.weight";
      writer.add_tensor(name, {static_cast<int64_t>(factors->size())}, GgmlType::f32,
                        [factors] { return at::tensor(at::ArrayRef<double>(*factors), at::kDouble).to(at::kFloat); });
      count(GgmlType::f32);
    }
    summary.warnings.push_back("LongRoPE: llama.cpp takes the long factors when its context (-c) exceeds " +
                               std::to_string(config.rope_scaling.original_max_position_embeddings) +
                               " tokens, transformers and Ferry when a sequence does; below that both use the short ones");
  }
  // Each tensor's type: the converter's rule (f32 ... q8_0) or llama-quantize's mix (q4_0 ... q6_k).
  const std::vector<FileTensor> outputs = file_tensors(planned);
  std::vector<GgmlType> types;
  if (is_llama_quantize_type(options.type)) {
    std::vector<GgufQuantTensor> named;
    for (const FileTensor& tensor : outputs) named.push_back({tensor.gguf_name, tensor.shape});
    types = gguf_quant_mix_types(options.type,
                                 {arch, config.num_hidden_layers, config.num_attention_heads,
                                  config.num_key_value_heads, config.moe.num_experts},
                                 named);
  } else {
    for (const FileTensor& tensor : outputs) types.push_back(gguf_tensor_type(options.type, tensor.gguf_name, tensor.shape));
  }
  // One Hugging Face weight as the converter writes it, before its ggml type.
  const auto converted = [&weights, &adapted, &in, lora_scaling](const GgufTensorLayout& tensor) {
    at::Tensor value = weights.tensor(tensor.hf_name);  // a view of the mapped file
    if (const auto nf4 = find_nf4_weight(weights, tensor.hf_name, in.string())) {
      value = kernels::nf4_dequantize_tensor(*nf4, nf4->dtype);  // QLoRA's base, in the dtype it trained in
    } else if (const auto int8 = find_int8_weight(weights, tensor.hf_name, in.string())) {
      value = kernels::int8_dequantize_tensor(*int8, at::kFloat);  // an int8 base
    } else if (const auto ggml = find_ggml_weight(weights, tensor.hf_name, in.string())) {
      value = ggml_dequantize(*ggml, at::kFloat);  // a GGUF model's base
    }
    if (adapted.count(tensor.hf_name)) {
      const std::string projection = tensor.hf_name.substr(0, tensor.hf_name.size() - std::string(".weight").size());
      const TensorMap parts{{tensor.hf_name, value},
                            {projection + ".lora_A.weight", weights.tensor(projection + ".lora_A.weight")},
                            {projection + ".lora_B.weight", weights.tensor(projection + ".lora_B.weight")}};
      value = merge_lora_tensors(parts, lora_scaling).at(tensor.hf_name);
    }
    if (tensor.permutation != GgufRowPermutation::none) value = permute_gguf_rows(value, tensor.groups);
    if (tensor.offset != 0) value = value.to(at::kFloat) + tensor.offset;  // Gemma's norms: stored as 1 + w
    return value;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const FileTensor& tensor = outputs[i];
    const GgmlType type = types[i];
    count(type);
    writer.add_tensor(tensor.gguf_name, tensor.shape, type, [&converted, &tensor, type] {
      if (tensor.parts.size() == 1 && tensor.parts[0]->expert < 0) return to_ggml(converted(*tensor.parts[0]), type);
      // A layer's experts: (experts, rows, columns), each expert's rows quantised on their own.
      std::vector<at::Tensor> experts;
      for (const GgufTensorLayout* part : tensor.parts) experts.push_back(converted(*part));
      bool same_dtype = true;
      for (const at::Tensor& e : experts) same_dtype = same_dtype && e.scalar_type() == experts[0].scalar_type();
      if (!same_dtype) {
        for (at::Tensor& e : experts) e = e.to(at::kFloat);  // a merged LoRA expert beside bf16 ones: exact
      }
      return to_ggml(at::stack(experts), type);
    });
  }

  summary.file = gguf_output_file(options.output);
  summary.tensors = writer.tensor_count();
  summary.file_bytes = writer.write(summary.file);
  return summary;
}

}  // namespace ferry::io
