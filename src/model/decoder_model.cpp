// The backbone forward: embedding, shared RoPE tables and masks, the layers, final norm.
#include "src/model/decoder_model.h"

#include <cmath>

#include "core/error.h"
#include "src/model/attention_mask.h"
#include "src/model/kv_cache.h"

namespace ferry {
namespace {

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes() << " " << t.scalar_type();
  return out.str();
}

void check_config(const ModelShape& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_hidden_layers < 0 ||
      c.num_attention_heads <= 0 || c.head_dim <= 0) {
    throw ConfigError(detail::concat("model config: vocab_size, hidden_size, intermediate_size, num_attention_heads "
                                     "and head_dim must be positive (got vocab_size=", c.vocab_size, ", hidden_size=",
                                     c.hidden_size, ", intermediate_size=", c.intermediate_size,
                                     ", num_attention_heads=", c.num_attention_heads, ", head_dim=", c.head_dim, ")"));
  }
}

}  // namespace

DecoderModelImpl::DecoderModelImpl(const ModelShape& config, const LayerBuiltHook& on_layer_built)
    : config_(config), rotary_((check_config(config), config)) {
  if (config.sliding_layers_own_rope()) sliding_rotary_.emplace(config.rotary_dim(), config.sliding_rope_theta, RopeScaling{});
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(config.vocab_size, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    decoder_layers.emplace_back(config, i);
    if (on_layer_built) on_layer_built(*decoder_layers.back(), i);
    layers->push_back(decoder_layers.back());
  }
  norm = register_module("norm", RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_weight));
}

LayerInputs DecoderModelImpl::layer_inputs(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                         const torch::Tensor& position_ids, const KvCache* cache,
                                         at::ScalarType dtype) const {
  if (!input_ids.defined() || input_ids.dim() != 2 || input_ids.scalar_type() != torch::kLong) {
    throw InputError("model input_ids must be a (B, T) int64 tensor of token ids, got " +
                     (input_ids.defined() ? shape_of(input_ids) : std::string("nothing")));
  }
  const int64_t batch = input_ids.size(0), length = input_ids.size(1);
  if (batch == 0 || length == 0) throw InputError("model input_ids is empty: " + shape_of(input_ids));
  const int64_t lowest = input_ids.min().item<int64_t>(), highest = input_ids.max().item<int64_t>();
  if (lowest < 0 || highest >= config_.vocab_size) {
    throw InputError(detail::concat("model input_ids holds token id ", lowest < 0 ? lowest : highest,
                                    " outside the vocabulary [0, ", config_.vocab_size,
                                    "); is the tokenizer the one of this model?"));
  }
  const int64_t past = cache != nullptr ? cache->length() : 0;
  if (cache != nullptr && cache->input_rows() != batch) {
    throw UserError(detail::concat("KV cache expects ", cache->input_rows(), " rows but input_ids has ", batch));
  }
  const bool full_mask = attention_mask.defined() && attention_mask.dim() == 4;
  if (full_mask) {
    if (attention_mask.scalar_type() != torch::kBool || attention_mask.size(1) != 1 ||
        (attention_mask.size(0) != batch && attention_mask.size(0) != 1) || attention_mask.size(2) != length ||
        attention_mask.size(3) != past + length) {
      throw InputError(detail::concat("model attention_mask given as a full mask must be bool (B, 1, T, T_past + T) = (",
                                      batch, ", 1, ", length, ", ", past + length, "), got ", shape_of(attention_mask)));
    }
  } else if (attention_mask.defined() &&
             (attention_mask.dim() != 2 || attention_mask.size(0) != batch || attention_mask.size(1) != past + length)) {
    throw InputError(detail::concat("model attention_mask must be (B, T_past + T) = (", batch, ", ", past + length,
                                    "), got ", shape_of(attention_mask)));
  }
  torch::Tensor positions = position_ids;
  if (positions.defined()) {
    if (positions.dim() != 2 || positions.size(1) != length || (positions.size(0) != batch && positions.size(0) != 1)) {
      throw InputError(detail::concat("model position_ids must be (B, T) = (", batch, ", ", length, "), got ",
                                      shape_of(positions)));
    }
    positions = positions.to(input_ids.device(), torch::kLong);
  } else if (attention_mask.defined() && !full_mask) {
    positions = position_ids_from_attention_mask(attention_mask.to(input_ids.device())).narrow(1, past, length);
  } else {
    positions = (torch::arange(length, input_ids.options()) + past).unsqueeze(0);  // (1, T)
  }
  LayerInputs inputs;
  std::tie(inputs.cos, inputs.sin) = rotary_.cos_sin(positions, dtype);
  if (sliding_rotary_) std::tie(inputs.sliding_cos, inputs.sliding_sin) = sliding_rotary_->cos_sin(positions, dtype);
  if (full_mask) {
    inputs.mask = attention_mask.to(input_ids.device());
  } else {
    inputs.mask = build_attention_mask(attention_mask.defined() ? attention_mask.to(input_ids.device()) : attention_mask,
                                       length, past);
    if (inputs.mask.defined()) inputs.mask = inputs.mask.to(input_ids.device());
  }
  // Sliding layers: keys more than sliding_window - 1 places back are masked (only once a sequence is longer).
  if (config_.any_layer_slides()) {
    inputs.sliding_mask = apply_sliding_window(inputs.mask, length, past, config_.sliding_window, input_ids.device());
  }
  return inputs;
}

torch::Tensor DecoderModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                      const torch::Tensor& position_ids, KvCache* cache) {
  const torch::Tensor weight = embed_tokens->weight;
  torch::Tensor ids = input_ids;
  if (ids.defined() && ids.scalar_type() == torch::kInt) ids = ids.to(torch::kLong);
  if (ids.defined()) ids = ids.to(weight.device());
  const LayerInputs inputs = layer_inputs(ids, attention_mask, position_ids, cache, weight.scalar_type());
  torch::Tensor h = embed(ids);  // (B, T, C)
  for (auto& layer : decoder_layers) h = layer(h, inputs, cache);
  if (cache != nullptr) cache->advance(ids.size(1));
  return norm(h);
}

torch::Tensor DecoderModelImpl::forward_fixed(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                                              const torch::Tensor& mask, const torch::Tensor& sliding_mask, KvCache& cache) {
  const at::ScalarType dtype = embed_tokens->weight.scalar_type();
  LayerInputs inputs;
  std::tie(inputs.cos, inputs.sin) = rotary_.cos_sin(position_ids, dtype);
  if (sliding_rotary_) std::tie(inputs.sliding_cos, inputs.sliding_sin) = sliding_rotary_->cos_sin(position_ids, dtype);
  inputs.mask = mask;
  inputs.sliding_mask = sliding_mask;
  torch::Tensor h = embed(input_ids);  // (B, 1, C)
  for (auto& layer : decoder_layers) h = layer(h, inputs, &cache);
  return norm(h);
}

torch::Tensor DecoderModelImpl::embed(const torch::Tensor& input_ids) {
  torch::Tensor h = embed_tokens(input_ids);  // (B, T, C)
  if (config_.scale_embeddings) {
    // transformers: a float32 sqrt(hidden_size) cast to the weights' dtype, then multiplied.
    const double root = std::sqrt(static_cast<double>(config_.hidden_size));
    h = h * at::scalar_tensor(root, h.options().dtype(torch::kFloat)).to(h.scalar_type());
  }
  return h;
}

void DecoderModelImpl::set_router_load(const std::shared_ptr<RouterLoad>& load) {
  for (auto& layer : decoder_layers) {
    if (layer->moe) layer->moe->set_router_load(load);
  }
}

}  // namespace ferry
