// The tensors a config.json implies (see hf_tensor_specs.h), and the checks every model load runs
// on them before allocating.
#include "src/io/hf_tensor_specs.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "kernels/cpu/nf4_state.h"
#include "src/io/hf_checkpoint.h"

namespace ferry::io {
namespace {

const std::string kQueryRows = "num_attention_heads x head_dim";
const std::string kKeyValueRows = "num_key_value_heads x head_dim";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// The product of `shape`, or nullopt when it overflows (a hostile config).
std::optional<int64_t> element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (const int64_t dim : shape) {
    if (__builtin_mul_overflow(count, dim, &count)) return std::nullopt;
  }
  return count;
}

// Does a stored tensor hold what `spec` describes? Float tensors by shape; a bitsandbytes NF4
// weight (two 4-bit codes a byte, stored as uint8 or, with bnb_4bit_quant_storage, in a float
// dtype; `.absmax` beside it) by its bytes; int8 ones by shape.
bool stored_as_specified(const TensorInfo& info, const HfTensorSpec& spec, bool nf4_packed) {
  if (nf4_packed || info.dtype == at::kByte) {
    const std::optional<int64_t> stored = element_count(info.shape), wanted = element_count(spec.shape);
    return stored && wanted && *stored * static_cast<int64_t>(c10::elementSize(info.dtype)) * 2 == *wanted;
  }
  if (info.dtype == at::kChar || at::isFloatingType(info.dtype)) return info.shape == spec.shape;
  return true;  // another format's companion tensor: its loader checks it
}

[[noreturn]] void throw_mismatch(const HfTensorSpec& spec, const TensorInfo& info, const std::filesystem::path& config_file) {
  // The first dimension that differs names the key; a different rank names the whole shape.
  std::string key = "the shape", value = shape_text(spec.shape), stored = shape_text(info.shape);
  if (info.shape.size() == spec.shape.size()) {
    for (size_t i = 0; i < spec.shape.size(); ++i) {
      if (info.shape[i] != spec.shape[i]) {
        key = spec.dims[i];
        value = std::to_string(spec.shape[i]);
        stored = std::to_string(info.shape[i]) + " (" + spec.name + " is " + shape_text(info.shape) + ")";
        break;
      }
    }
  } else {
    stored = shape_text(info.shape) + " (" + spec.name + ")";
  }
  throw InputError(detail::concat(config_file.string(), ": ", key, " is ", value, ", but the weights say ", stored,
                                  "; the config implies ", spec.name, " ", shape_text(spec.shape),
                                  ". This config.json does not describe these weights: fix ", key,
                                  " or use the config.json that came with them"));
}

// The number of decoder layers the weight files hold: 1 + the largest N of "model.layers.N.".
int64_t stored_layer_count(const HfWeights& weights) {
  const std::string prefix = "model.layers.";
  int64_t count = 0;
  for (const std::string& name : weights.names()) {
    if (name.rfind(prefix, 0) != 0) continue;
    int64_t layer = 0;
    const char* begin = name.data() + prefix.size();
    const auto [end, error] = std::from_chars(begin, name.data() + name.size(), layer);
    if (error == std::errc() && *end == '.') count = std::max(count, layer + 1);
  }
  return count;
}

}  // namespace

std::vector<HfTensorSpec> hf_tensor_specs(const LlamaConfig& c) {
  const int64_t q_rows = c.num_attention_heads * c.head_dim, kv_rows = c.num_key_value_heads * c.head_dim;
  std::vector<HfTensorSpec> out;
  out.push_back({"model.embed_tokens.weight", -1, "", {c.vocab_size, c.hidden_size}, {"vocab_size", "hidden_size"}});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    const auto add = [&](const std::string& suffix, std::vector<int64_t> shape, std::vector<std::string> dims) {
      out.push_back({prefix + suffix, layer, suffix, std::move(shape), std::move(dims)});
    };
    add("input_layernorm.weight", {c.hidden_size}, {"hidden_size"});
    add("self_attn.q_proj.weight", {q_rows, c.hidden_size}, {kQueryRows, "hidden_size"});
    if (c.attention_bias) add("self_attn.q_proj.bias", {q_rows}, {kQueryRows});
    add("self_attn.k_proj.weight", {kv_rows, c.hidden_size}, {kKeyValueRows, "hidden_size"});
    if (c.attention_bias) add("self_attn.k_proj.bias", {kv_rows}, {kKeyValueRows});
    add("self_attn.v_proj.weight", {kv_rows, c.hidden_size}, {kKeyValueRows, "hidden_size"});
    if (c.attention_bias) add("self_attn.v_proj.bias", {kv_rows}, {kKeyValueRows});
    if (c.qk_norm) {  // Qwen3's per-head RMSNorm of queries and keys
      add("self_attn.q_norm.weight", {c.head_dim}, {"head_dim"});
      add("self_attn.k_norm.weight", {c.head_dim}, {"head_dim"});
    }
    add("self_attn.o_proj.weight", {c.hidden_size, q_rows}, {"hidden_size", kQueryRows});
    if (c.attention_output_bias) add("self_attn.o_proj.bias", {c.hidden_size}, {"hidden_size"});
    add("post_attention_layernorm.weight", {c.hidden_size}, {"hidden_size"});
    add("mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, {"intermediate_size", "hidden_size"});
    if (c.mlp_bias) add("mlp.gate_proj.bias", {c.intermediate_size}, {"intermediate_size"});
    add("mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}, {"intermediate_size", "hidden_size"});
    if (c.mlp_bias) add("mlp.up_proj.bias", {c.intermediate_size}, {"intermediate_size"});
    add("mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}, {"hidden_size", "intermediate_size"});
    if (c.mlp_bias) add("mlp.down_proj.bias", {c.hidden_size}, {"hidden_size"});
  }
  out.push_back({"model.norm.weight", -1, "", {c.hidden_size}, {"hidden_size"}});
  if (!c.tie_word_embeddings) {
    out.push_back({"lm_head.weight", -1, "", {c.vocab_size, c.hidden_size}, {"vocab_size", "hidden_size"}});
  }
  return out;
}

void check_weights_match_config(const LlamaConfig& config, const HfWeights& weights,
                                const std::filesystem::path& config_file) {
  // The layer count first: the specs are built only for as many layers as the files hold.
  const int64_t stored_layers = stored_layer_count(weights);
  if (stored_layers != config.num_hidden_layers) {
    throw InputError(detail::concat(config_file.string(), ": num_hidden_layers is ", config.num_hidden_layers,
                                    ", but the weights hold ", stored_layers, " decoder layers (model.layers.0",
                                    stored_layers > 1 ? " to model.layers." + std::to_string(stored_layers - 1) : "",
                                    "). This config.json does not describe these weights: fix num_hidden_layers "
                                    "or use the config.json that came with them"));
  }
  for (const HfTensorSpec& spec : hf_tensor_specs(config)) {
    if (!weights.contains(spec.name)) continue;  // missing tensors: load_state reports them all at once
    const TensorInfo& info = weights.info(spec.name);
    const bool nf4_packed = weights.contains(spec.name + "." + kernels::kNf4AbsmaxKey);
    if (!stored_as_specified(info, spec, nf4_packed)) throw_mismatch(spec, info, config_file);
  }
}

void check_model_fits_host(const LlamaConfig& config, uint64_t bytes_per_parameter, uint64_t extra_bytes,
                           const std::string& what, uint64_t available) {
  if (available == 0) available = host_memory_available().value_or(0);
  if (available == 0) return;
  // In long double: a hostile config's parameter count overflows int64.
  const long double d = static_cast<long double>(config.hidden_size);
  const long double per_layer =
      d * config.head_dim * (2.0L * config.num_attention_heads + 2.0L * config.num_key_value_heads) +
      3.0L * d * config.intermediate_size + 2.0L * d;
  const long double parameters = static_cast<long double>(config.vocab_size) * d * (config.tie_word_embeddings ? 1 : 2) +
                                 per_layer * config.num_hidden_layers + d;
  const long double needed = parameters * bytes_per_parameter + extra_bytes;
  if (needed <= static_cast<long double>(available)) return;
  const auto bytes = [](long double b) {
    return b >= static_cast<long double>(std::numeric_limits<uint64_t>::max()) ? std::string("over 16 EiB")
                                                                             : format_bytes_approx(static_cast<uint64_t>(b));
  };
  std::ostringstream count;
  count.precision(3);
  count << parameters / 1e9L;
  throw InputError(detail::concat(
      what, " needs ", bytes(needed), " of host memory (", count.str(), " billion parameters x ", bytes_per_parameter,
      " bytes", extra_bytes ? " + " + format_bytes_approx(extra_bytes) + " read from the weight files" : "",
      "), but only ", format_bytes_approx(available),
      " is available (MemAvailable): check the config.json's sizes, free memory, or use a smaller model"));
}

}  // namespace ferry::io
