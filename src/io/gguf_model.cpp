// A GGUF model read as a Hugging Face model (see gguf_model.h).
#include "src/io/gguf_model.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "src/io/ggml_dequantize_tensor.h"
#include "src/io/gguf_tensor_layout.h"
#include "src/model/family/gguf_metadata.h"
#include "src/model/family/model_family.h"

namespace ferry::io {

namespace {

[[noreturn]] void fail(const GgufFile& file, const std::string& what) {
  throw InputError(file.describe() + ": " + what);
}

// A GgufFile as the family descriptions see it (src/model/family/gguf_metadata.h).
class FileMetadata : public GgufMetadata {
 public:
  FileMetadata(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}
  const std::string& architecture() const override { return arch_; }
  int64_t get_int(const std::string& key, int64_t fallback) const override {
    return file_.get_int(arch_ + "." + key, fallback);
  }
  double get_float(const std::string& key, double fallback) const override {
    return file_.get_float(arch_ + "." + key, fallback);
  }
  std::vector<int64_t> get_int_array(const std::string& key) const override {
    const GgufValue* value = file_.find(arch_ + "." + key);
    if (value == nullptr) return {};
    if (!value->is_array() || value->integers.size() != value->numbers.size()) {
      fail("metadata '" + arch_ + "." + key + "' must be an array of integers or bools, not " +
           gguf_value_type_name(*value));
    }
    return value->integers;
  }
  std::vector<double> float_tensor(const std::string& name) const override {
    const GgufTensorInfo* tensor = file_.find_tensor(name);
    if (tensor == nullptr) return {};
    if (tensor->type != GgmlType::f32 || tensor->ne.size() != 1) {
      fail("tensor '" + name + "' must be a one-dimensional F32 tensor; the file is corrupt");
    }
    const auto* values = reinterpret_cast<const float*>(file_.tensor_data(*tensor));
    return std::vector<double>(values, values + tensor->ne[0]);
  }
  [[noreturn]] void fail(const std::string& what) const override { ::ferry::io::fail(file_, what); }

 private:
  const GgufFile& file_;
  std::string arch_;
};

int64_t positive(const GgufFile& file, const std::string& key, int64_t value) {
  if (value <= 0 || value > (int64_t{1} << 40)) {
    fail(file, "metadata '" + key + "' = " + std::to_string(value) + " is not a plausible size; the file is corrupt");
  }
  return value;
}

int64_t positive_key(const GgufFile& file, const std::string& key) { return positive(file, key, file.get_int(key)); }

// Shapes as ggml sees them: ne with trailing 1s dropped, so (1, hidden) and (hidden) are the same
// (the converter writes Qwen2-MoE's shared expert gate as (1, hidden); older files as (hidden)).
bool same_ggml_shape(std::vector<int64_t> a, std::vector<int64_t> b) {
  while (a.size() > 1 && a.front() == 1) a.erase(a.begin());
  while (b.size() > 1 && b.front() == 1) b.erase(b.begin());
  return a == b;
}

// llama3 rope scaling from llama.cpp's per-frequency factors (convert_hf_to_gguf.py writes
// 1 for high frequencies, `factor` for low ones and 1 / ((1 - s) / factor + s) between, with
// s = (original_context / wavelength - low) / (high - low)). s is linear in 1 / wavelength, so the
// smooth factors give its slope and intercept; with Llama's low_freq_factor = 1 these fix
// high_freq_factor and the original context. The fit is accepted only when it gives back every
// factor of the file.
RopeScaling llama3_rope_from_factors(const GgufFile& file, const GgufTensorInfo& tensor, double theta, int64_t head_dim) {
  if (tensor.type != GgmlType::f32 || tensor.ne.size() != 1 || tensor.ne[0] != head_dim / 2) {
    fail(file, "tensor 'rope_freqs.weight' must be F32 with head_dim / 2 = " + std::to_string(head_dim / 2) +
                   " values; the file is corrupt");
  }
  const auto* factors = reinterpret_cast<const float*>(file.tensor_data(tensor));
  const int64_t n = head_dim / 2;
  double factor = 0.0;
  for (int64_t i = 0; i < n; ++i) factor = std::max(factor, static_cast<double>(factors[i]));
  std::vector<double> xs, ys;  // 1 / wavelength, s
  for (int64_t i = 0; i < n; ++i) {
    const double f = factors[i];
    if (std::fabs(f - 1.0) < 1e-6 || std::fabs(f - factor) < 1e-6 * factor) continue;
    const double freq = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    xs.push_back(freq / (2 * M_PI));
    ys.push_back((1.0 / f - 1.0 / factor) / (1.0 - 1.0 / factor));
  }
  RopeScaling scaling;
  scaling.type = RopeScalingType::llama3;
  scaling.factor = factor;
  if (factor <= 1.0 || xs.size() < 2) {
    fail(file, "tensor 'rope_freqs.weight' holds rope factors Ferry cannot express as llama3 rope scaling "
               "(it needs a factor above 1 and at least two frequencies between the low and high bands)");
  }
  double mx = 0, my = 0;
  for (size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += ys[i];
  mx /= static_cast<double>(xs.size());
  my /= static_cast<double>(xs.size());
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (ys[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
  const double slope = sxy / sxx, intercept = my - slope * mx;  // s = slope / wavelength + intercept
  scaling.low_freq_factor = 1.0;
  // high - low, rounded to 4 decimals: the factors are float32, the published settings round numbers
  const double span = std::round(-1.0 / intercept * 1e4) / 1e4;
  scaling.high_freq_factor = scaling.low_freq_factor + span;
  scaling.original_max_position_embeddings = std::llround(slope * span);
  // Every factor again, as the converter computes it.
  const double old = static_cast<double>(scaling.original_max_position_embeddings);
  const double low_wavelen = old / scaling.low_freq_factor, high_wavelen = old / scaling.high_freq_factor;
  for (int64_t i = 0; i < n; ++i) {
    const double freq = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double wavelen = 2 * M_PI / freq;
    double expected = 1.0;
    if (wavelen > low_wavelen) {
      expected = factor;
    } else if (wavelen >= high_wavelen) {
      const double s = (old / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
      expected = 1.0 / ((1.0 - s) / factor + s);
    }
    if (!(span > 0) || std::fabs(expected - factors[i]) > 1e-4 * std::max(1.0, expected)) {
      fail(file, "tensor 'rope_freqs.weight' holds rope factors that do not follow llama3 rope scaling (factor " +
                     std::to_string(i) + " is " + std::to_string(factors[i]) + "); Ferry cannot run this model");
    }
  }
  return scaling;
}

}  // namespace

ModelShape gguf_model_config(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  const ModelFamily* family = find_gguf_family(arch);
  if (family == nullptr) {
    fail(file, "general.architecture is '" + arch + "', which Ferry does not read (it reads " +
                   supported_gguf_architectures() + ")");
  }
  const std::string p = arch + ".";
  ModelShape c;
  c.model_type = family->model_types.front();
  c.max_position_embeddings = positive_key(file, p + "context_length");
  if (c.max_position_embeddings > (int64_t{1} << 24)) {
    fail(file, "metadata '" + p + "context_length' = " + std::to_string(c.max_position_embeddings) +
                   " positions is beyond any model (at most 16M); the file is corrupt");
  }
  c.hidden_size = positive_key(file, p + "embedding_length");
  c.num_hidden_layers = positive_key(file, p + "block_count");
  // Each layer is at least 6 tensors (Phi-3's fused ones: two norms, attn_qkv, attn_output, ffn_up,
  // ffn_down): a larger count is a corrupt field, not a model to plan for.
  if (c.num_hidden_layers * 6 > static_cast<int64_t>(file.tensors().size())) {
    fail(file, "metadata '" + p + "block_count' = " + std::to_string(c.num_hidden_layers) + " layers, but the file holds " +
                   std::to_string(file.tensors().size()) + " tensors; the file is corrupt or incomplete");
  }
  if (const GgufValue* ff = file.find(p + "feed_forward_length"); ff != nullptr && ff->is_array()) {
    fail(file, "metadata '" + p + "feed_forward_length' differs per layer; Ferry needs one size for every layer");
  }
  c.intermediate_size = positive_key(file, p + "feed_forward_length");
  c.num_attention_heads = positive_key(file, p + "attention.head_count");
  c.num_key_value_heads = positive(file, p + "attention.head_count_kv", file.get_int(p + "attention.head_count_kv", c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail(file, "attention.head_count " + std::to_string(c.num_attention_heads) + " is not a multiple of head_count_kv " +
                   std::to_string(c.num_key_value_heads) + "; the file is corrupt");
  }
  if (!file.has(p + "attention.key_length") && c.hidden_size % c.num_attention_heads != 0) {
    fail(file, "embedding_length is not a multiple of attention.head_count and attention.key_length is missing");
  }
  c.head_dim = positive(file, p + "attention.key_length", file.get_int(p + "attention.key_length", c.hidden_size / c.num_attention_heads));
  if (file.get_int(p + "attention.value_length", c.head_dim) != c.head_dim) {
    fail(file, "attention.value_length differs from attention.key_length; Ferry's attention needs them equal");
  }
  if (c.head_dim % 2 != 0) fail(file, "the head size " + std::to_string(c.head_dim) + " is odd; RoPE needs it even");
  const int64_t rotary = file.get_int(p + "rope.dimension_count", c.head_dim);
  if (rotary <= 0 || rotary > c.head_dim || rotary % 2 != 0) {
    fail(file, "rope.dimension_count " + std::to_string(rotary) + " must be even and at most the head size " +
                   std::to_string(c.head_dim));
  }
  c.partial_rotary_factor = static_cast<double>(rotary) / static_cast<double>(c.head_dim);
  // float32 in the file; transformers takes the float32 value as it is, and so does Ferry.
  c.rms_norm_eps = file.get_float(p + "attention.layer_norm_rms_epsilon");
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) fail(file, "attention.layer_norm_rms_epsilon is not in (0, 1)");
  c.rope_theta = file.get_float(p + "rope.freq_base", 10000.0);
  if (!(c.rope_theta > 1)) fail(file, "rope.freq_base must be above 1");
  const std::string scaling = file.get_string(p + "rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_scaling.type = RopeScalingType::linear;
    c.rope_scaling.factor = file.get_float(p + "rope.scaling.factor");
    if (!(c.rope_scaling.factor >= 1)) fail(file, "rope.scaling.factor must be at least 1");
  } else if (scaling != "none") {
    fail(file, "rope.scaling.type '" + scaling + "' is not supported (Ferry runs none, linear, and llama3 rope factors)");
  }
  if (const GgufTensorInfo* factors = file.find_tensor("rope_freqs.weight")) {
    if (!family->gguf_permutes_qk || c.rope_scaling.type != RopeScalingType::none) {
      fail(file, "a 'rope_freqs.weight' tensor is only read for the llama architecture without other rope scaling");
    }
    c.rope_scaling = llama3_rope_from_factors(file, *factors, c.rope_theta, c.head_dim);
  }

  const GgufTensorInfo* embed = file.find_tensor("token_embd.weight");
  if (embed == nullptr) fail(file, "tensor 'token_embd.weight' is missing");
  if (file.has(p + "vocab_size")) {
    c.vocab_size = positive_key(file, p + "vocab_size");
  } else if (file.has("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int64_t>(file.get_strings("tokenizer.ggml.tokens").size());
  } else {
    c.vocab_size = embed->ne.size() == 2 ? embed->ne[1] : 0;
  }
  c.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  c.attention_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.attention_output_bias = file.find_tensor("blk.0.attn_output.bias") != nullptr;
  if (family->read_gguf != nullptr) family->read_gguf(FileMetadata(file, arch), c);
  c.bos_token_id = file.get_int("tokenizer.ggml.bos_token_id", -1);
  const int64_t eos = file.get_int("tokenizer.ggml.eos_token_id", -1);
  c.eos_token_ids = eos >= 0 ? std::vector<int64_t>{eos} : std::vector<int64_t>{};
  c.pad_token_id = file.get_int("tokenizer.ggml.padding_token_id", -1);
  for (const int64_t id : {c.bos_token_id, eos, c.pad_token_id}) {
    if (id >= c.vocab_size) fail(file, "a tokenizer.ggml.*_token_id (" + std::to_string(id) + ") is outside the vocabulary");
  }
  c.torch_dtype = "float32";
  return c;
}

GgufWeights::GgufWeights(GgufFile file) : file_(std::move(file)), config_(gguf_model_config(file_)) {
  const std::string arch = file_.get_string("general.architecture");
  // Tensors the metadata reader took (rope factors), not weights.
  std::set<std::string> used{"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"};
  for (const GgufTensorLayout& layout : gguf_tensor_layouts(config_)) {
    const std::string& gguf_name = layout.gguf_name;
    const GgufTensorInfo* tensor = file_.find_tensor(gguf_name);
    if (tensor == nullptr) {
      if (layout.hf_name == "lm_head.weight") continue;  // tied (checked above)
      fail(file_, "tensor '" + gguf_name + "' (Hugging Face " + layout.hf_name + ") is missing; the file is incomplete "
                  "or its model is not a " + arch + " model as Ferry reads it");
    }
    if (!same_ggml_shape(tensor->shape(), layout.file_shape())) {
      std::string have, want;
      for (int64_t d : tensor->shape()) have += (have.empty() ? "" : ", ") + std::to_string(d);
      for (int64_t d : layout.file_shape()) want += (want.empty() ? "" : ", ") + std::to_string(d);
      fail(file_, "tensor '" + gguf_name + "' has shape [" + have + "] but the metadata says [" + want +
                  "]; the file is corrupt or its metadata does not describe its tensors");
    }
    Source source;
    source.tensor = tensor;
    source.permute_groups = layout.permutation == GgufRowPermutation::none ? 0 : layout.groups;
    source.offset = layout.offset;
    source.expert = layout.expert;
    source.experts = layout.experts;
    source.info.shape = layout.shape;
    source.info.dtype = tensor->type == GgmlType::f16 ? at::kHalf : tensor->type == GgmlType::bf16 ? at::kBFloat16 : at::kFloat;
    used.insert(gguf_name);
    sources_.emplace(layout.hf_name, std::move(source));
    names_.push_back(layout.hf_name);
  }
  for (const GgufTensorInfo& tensor : file_.tensors()) {
    if (used.count(tensor.name) == 0) {
      fail(file_, "tensor '" + tensor.name + "' is not part of a " + arch + " model as Ferry reads it (a different "
                  "architecture written under this name?); Ferry reads " + supported_gguf_architectures());
    }
  }
  std::sort(names_.begin(), names_.end());
}

const TensorInfo& GgufWeights::info(const std::string& name) const {
  const auto it = sources_.find(name);
  FERRY_CHECK(it != sources_.end(), "GGUF weights have no tensor ", name);
  return it->second.info;
}

const GgufTensorInfo& GgufWeights::source(const std::string& name) const {
  const auto it = sources_.find(name);
  FERRY_CHECK(it != sources_.end(), "GGUF weights have no tensor ", name);
  return *it->second.tensor;
}

at::Tensor GgufWeights::load(const std::string& name) const {
  const auto it = sources_.find(name);
  FERRY_CHECK(it != sources_.end(), "GGUF weights have no tensor ", name);
  const Source& source = it->second;
  at::Tensor value = dequantize_tensor(source.tensor->type, file_.tensor_data(*source.tensor) + source.byte_offset(),
                                       source.info.shape, source.info.dtype);
  if (source.permute_groups > 0) value = unpermute_gguf_rows(value, source.permute_groups);
  if (source.offset != 0) value = value - source.offset;  // Gemma's norms: stored as 1 + w
  return value;
}

uint64_t GgufWeights::stored_bytes(const std::string& name) const {
  const auto it = sources_.find(name);
  FERRY_CHECK(it != sources_.end(), "GGUF weights have no tensor ", name);
  return it->second.bytes();
}

GgmlTensor GgufWeights::packed(const std::string& name) const {
  const auto it = sources_.find(name);
  FERRY_CHECK(it != sources_.end(), "GGUF weights have no tensor ", name);
  const Source& source = it->second;
  const GgufTensorInfo& tensor = *source.tensor;
  FERRY_CHECK(source.info.shape.size() == 2 && source.offset == 0, "GgufWeights::packed: ", tensor.name,
              " is not a 2-D weight stored as it is");
  const int64_t rows = source.info.shape[0];
  const int64_t row_bytes = static_cast<int64_t>(source.bytes()) / rows;
  at::Tensor blocks = at::empty({rows, row_bytes}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(blocks.data_ptr<uint8_t>(), file_.tensor_data(tensor) + source.byte_offset(), source.bytes());
  if (source.permute_groups > 0) blocks = unpermute_gguf_rows(blocks, source.permute_groups);
  return ggml_tensor_from_blocks(blocks, tensor.type, file_.describe() + ": tensor '" + tensor.name + "'");
}

}  // namespace ferry::io
