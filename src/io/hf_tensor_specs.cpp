// The checks every model load runs before allocating (see hf_tensor_specs.h).
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
#include "src/model/family/model_tensors.h"

namespace ferry::io {
namespace {

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
bool stored_as_specified(const TensorInfo& info, const ModelTensor& spec, bool nf4_packed) {
  if (nf4_packed || info.dtype == at::kByte) {
    const std::optional<int64_t> stored = element_count(info.shape), wanted = element_count(spec.shape);
    return stored && wanted && *stored * static_cast<int64_t>(c10::elementSize(info.dtype)) * 2 == *wanted;
  }
  if (info.dtype == at::kChar || at::isFloatingType(info.dtype)) return info.shape == spec.shape;
  return true;  // another format's companion tensor: its loader checks it
}

[[noreturn]] void throw_mismatch(const ModelTensor& spec, const TensorInfo& info, const std::filesystem::path& config_file) {
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

void check_weights_match_config(const ModelShape& config, const HfWeights& weights,
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
  for (const ModelTensor& spec : model_tensors(config)) {
    if (!weights.contains(spec.name)) continue;  // missing tensors: load_state reports them all at once
    const TensorInfo& info = weights.info(spec.name);
    const bool nf4_packed = weights.contains(spec.name + "." + kernels::kNf4AbsmaxKey);
    if (!stored_as_specified(info, spec, nf4_packed)) throw_mismatch(spec, info, config_file);
  }
}

void check_model_fits_host(const ModelShape& config, uint64_t bytes_per_parameter, uint64_t extra_bytes,
                           const std::string& what, uint64_t available) {
  if (available == 0) available = host_memory_available().value_or(0);
  if (available == 0) return;
  // In long double: a hostile config's parameter count overflows int64.
  const long double parameters = parameter_count_unbounded(config);
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
