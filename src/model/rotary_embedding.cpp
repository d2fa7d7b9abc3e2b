// RoPE tables (plain, linear, llama3, LongRoPE, YaRN) and rotation, following transformers' modeling_rope_utils.py step by step so that
// fp32 results agree to rounding.
#include "src/model/rotary_embedding.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"

namespace ferry {

at::Tensor rope_inverse_frequencies(const ModelShape& config) {
  return rope_inverse_frequencies(config.rotary_dim(), config.rope_theta, config.rope_scaling);
}

at::Tensor rope_inverse_frequencies(int64_t dim, double theta, const RopeScaling& scaling, bool long_context) {
  if (dim <= 0 || dim % 2 != 0) {
    throw ConfigError(detail::concat("model config: the rotated part of a head (head_dim x partial_rotary_factor) must "
                                     "be a positive even number for RoPE, got ", dim));
  }
  // inv_freq = 1 / theta^(2i / dim), i = 0 .. dim/2 - 1
  const at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  at::Tensor inv_freq = at::reciprocal(at::pow(theta, exponents));
  switch (scaling.type) {
    case RopeScalingType::none:
      return inv_freq;
    case RopeScalingType::linear:
      return inv_freq / scaling.factor;
    case RopeScalingType::llama3: {
      // Long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
      const double factor = scaling.factor;
      const double low = scaling.low_freq_factor, high = scaling.high_freq_factor;
      const double old_context = static_cast<double>(scaling.original_max_position_embeddings);
      if (high == low) throw ConfigError("model config: rope_scaling high_freq_factor must differ from low_freq_factor");
      const double low_freq_wavelen = old_context / low;
      const double high_freq_wavelen = old_context / high;
      const at::Tensor wavelen = 2 * M_PI / inv_freq;
      at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq);
      const at::Tensor smooth = (old_context / wavelen - low) / (high - low);
      const at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
      const at::Tensor is_medium = at::logical_not(wavelen < high_freq_wavelen) * at::logical_not(wavelen > low_freq_wavelen);
      return at::where(is_medium, smoothed, scaled);
    }
    case RopeScalingType::yarn: {
      // transformers' _compute_yarn_parameters: frequencies that turn fewer than beta_slow times over
      // the original context are interpolated (divided by factor), those turning more than
      // beta_fast times kept, a linear ramp between.
      const double factor = scaling.factor;
      const double original = static_cast<double>(scaling.original_max_position_embeddings);
      const auto correction_dim = [&](double rotations) {
        return (static_cast<double>(dim) * std::log(original / (rotations * 2 * M_PI))) / (2 * std::log(theta));
      };
      double low = correction_dim(scaling.beta_fast), high = correction_dim(scaling.beta_slow);
      if (scaling.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;  // no singularity
      const at::Tensor pos_freqs = at::pow(theta, exponents);
      const at::Tensor extrapolation = at::reciprocal(pos_freqs);
      const at::Tensor interpolation = at::reciprocal(factor * pos_freqs);
      const at::Tensor ramp = at::clamp((at::arange(dim / 2, at::kLong).to(at::kFloat) - low) / (high - low), 0, 1);
      const at::Tensor extrapolated = 1 - ramp;
      return interpolation * (1 - extrapolated) + extrapolation * extrapolated;
    }
    case RopeScalingType::longrope: {
      // inv_freq = 1 / (ext_factors * theta^(2i / dim)), the factors float32 as transformers makes them.
      const std::vector<double>& factors = long_context ? scaling.long_factor : scaling.short_factor;
      if (static_cast<int64_t>(factors.size()) != dim / 2) {
        throw ConfigError(detail::concat("model config: rope_scaling ", long_context ? "long_factor" : "short_factor",
                                         " has ", factors.size(), " values; LongRoPE needs rotary_dim / 2 = ", dim / 2));
      }
      const at::Tensor ext = at::tensor(at::ArrayRef<double>(factors), at::kDouble).to(at::kFloat);
      return at::reciprocal(ext * at::pow(theta, exponents));
    }
  }
  FERRY_CHECK(false, "unknown rope scaling type");
  return {};
}

RotaryEmbedding::RotaryEmbedding(const ModelShape& config) : inv_freq_(rope_inverse_frequencies(config)) {
  if (config.rope_scaling.type == RopeScalingType::longrope) {
    long_inv_freq_ = rope_inverse_frequencies(config.rotary_dim(), config.rope_theta, config.rope_scaling, true);
    original_context_ = config.rope_scaling.original_max_position_embeddings;
  }
  attention_scaling_ = config.rope_attention_scaling();
}

RotaryEmbedding::RotaryEmbedding(int64_t rotary_dim, double theta, const RopeScaling& scaling)
    : inv_freq_(rope_inverse_frequencies(rotary_dim, theta, scaling)) {}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& position_ids, at::ScalarType dtype) const {
  if (!inv_freq_on_device_.defined() || inv_freq_on_device_.device() != position_ids.device()) {
    inv_freq_on_device_ = inv_freq_.to(position_ids.device());
  }
  at::Tensor inv_freq = inv_freq_on_device_;
  if (long_inv_freq_.defined()) {
    if (!long_inv_freq_on_device_.defined() || long_inv_freq_on_device_.device() != position_ids.device()) {
      long_inv_freq_on_device_ = long_inv_freq_.to(position_ids.device());
    }
    const at::Tensor beyond = (position_ids.max() + 1).gt(original_context_);  // a 0-dim bool, on the device
    inv_freq = at::where(beyond, long_inv_freq_on_device_, inv_freq);
  }
  const at::Tensor freqs = position_ids.unsqueeze(-1).to(at::kFloat) * inv_freq;  // (B, T, D/2)
  const at::Tensor angles = at::cat({freqs, freqs}, -1);                           // (B, T, D)
  if (attention_scaling_ != 1.0) {
    return {(angles.cos() * attention_scaling_).to(dtype), (angles.sin() * attention_scaling_).to(dtype)};
  }
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor x1 = x.narrow(-1, 0, half);
  const at::Tensor x2 = x.narrow(-1, half, half);
  const at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);  // cos/sin broadcast over heads
}

}  // namespace ferry
