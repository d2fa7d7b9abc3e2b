// Llama decoder block: attention (GQA, optional q/k norms, RoPE, SDPA), SwiGLU MLP, pre-norm
// residual layer; projections with an optional LoRA adapter.
#include "src/model/llama_block.h"

#include "core/error.h"
#include "src/model/kv_cache.h"
#include "src/model/rotary_embedding.h"

namespace ferry {
namespace {

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// (B, n_kv, L, D) -> (B, n_kv * repeats, L, D): each key/value head serves `repeats` query heads.
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t repeats) {
  if (repeats == 1) return x;
  const auto b = x.size(0), h = x.size(1), l = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, h, repeats, l, d}).reshape({b, h * repeats, l, d});
}

}  // namespace

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& config, int64_t layer_index)
    : layer_index_(layer_index),
      num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim) {
  if (num_kv_heads_ <= 0 || num_heads_ % num_kv_heads_ != 0) {
    throw ConfigError(detail::concat("model config: num_attention_heads (", num_heads_,
                                     ") must be a multiple of num_key_value_heads (", num_kv_heads_, ")"));
  }
  const int64_t c = config.hidden_size;
  q_proj = register_module("q_proj", linear(c, num_heads_ * head_dim_, config.attention_bias));
  k_proj = register_module("k_proj", linear(c, num_kv_heads_ * head_dim_, config.attention_bias));
  v_proj = register_module("v_proj", linear(c, num_kv_heads_ * head_dim_, config.attention_bias));
  o_proj = register_module("o_proj", linear(num_heads_ * head_dim_, c, config.attention_output_bias));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, config.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, config.rms_norm_eps));
  }
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                          const torch::Tensor& mask, KvCache* cache) {
  const int64_t b = x.size(0), t = x.size(1);
  const bool training = is_training();
  // q: (B, T, H, D); k: (B, T, n_kv, D)
  torch::Tensor q = lora_project(q_proj, q_lora, x, training).view({b, t, num_heads_, head_dim_});
  torch::Tensor k = lora_project(k_proj, k_lora, x, training).view({b, t, num_kv_heads_, head_dim_});
  if (q_norm) {  // Qwen3: each head normalised over D before RoPE, as transformers' Qwen3Attention does
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.transpose(1, 2);  // (B, H, T, D)
  k = k.transpose(1, 2);  // (B, n_kv, T, D)
  torch::Tensor v = lora_project(v_proj, v_lora, x, training).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  q = apply_rotary(q, cos, sin);
  k = apply_rotary(k, cos, sin);
  if (cache != nullptr) std::tie(k, v) = cache->append(layer_index_, k, v);  // (B, n_kv, L, D)
  const int64_t repeats = num_heads_ / num_kv_heads_;
  if (t == 1 && repeats > 1) {
    // A decode step: the `repeats` query heads of one key/value head attend as `repeats` queries
    // of that head, so its keys and values are read in place instead of copied per query head
    // (head h uses key/value head h / repeats, as repeat_kv lays them out).
    const torch::Tensor grouped = q.reshape({b, num_kv_heads_, repeats, head_dim_});
    const torch::Tensor out = at::scaled_dot_product_attention(
        grouped, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt, 0.0, false);  // (B, n_kv, repeats, D)
    return lora_project(o_proj, o_lora, out.reshape({b, 1, num_heads_ * head_dim_}), training);
  }
  k = repeat_kv(k, repeats);  // (B, H, L, D)
  v = repeat_kv(v, repeats);
  const bool causal = !mask.defined() && t > 1;
  const torch::Tensor out = at::scaled_dot_product_attention(
      q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt, 0.0, causal);  // (B, H, T, D)
  return lora_project(o_proj, o_lora, out.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}), training);
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaConfig& config) {
  const int64_t c = config.hidden_size, f = config.intermediate_size;
  gate_proj = register_module("gate_proj", linear(c, f, config.mlp_bias));
  up_proj = register_module("up_proj", linear(c, f, config.mlp_bias));
  down_proj = register_module("down_proj", linear(f, c, config.mlp_bias));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  const bool training = is_training();
  const torch::Tensor hidden =
      torch::silu(lora_project(gate_proj, gate_lora, x, training)) * lora_project(up_proj, up_lora, x, training);  // (..., F)
  return lora_project(down_proj, down_lora, hidden, training);
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const LlamaConfig& config, int64_t layer_index) {
  input_layernorm = register_module("input_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  self_attn = register_module("self_attn", LlamaAttention(config, layer_index));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  mlp = register_module("mlp", LlamaMlp(config));
}

torch::Tensor LlamaDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                             const torch::Tensor& mask, KvCache* cache) {
  const torch::Tensor h = x + self_attn(input_layernorm(x), cos, sin, mask, cache);
  return h + mlp(post_attention_layernorm(h));
}

}  // namespace ferry
