// The decoder block: attention (GQA, optional q/k norms, whole/partial/no RoPE, SDPA or soft-capped
// scores), the gated MLP, and the residual layer with its norms where the family puts them.
#include "src/model/decoder_layer.h"

#include <cmath>

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

// RoPE on the first cos.size(-1) channels of each head, the rest as they are (partial rotary).
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t rotary = cos.size(-1);
  if (rotary == x.size(-1)) return apply_rotary(x, cos, sin);
  return torch::cat({apply_rotary(x.narrow(-1, 0, rotary), cos, sin), x.narrow(-1, rotary, x.size(-1) - rotary)}, -1);
}

// Attention with tanh soft-capped scores, as transformers' eager attention computes it (Gemma 2):
// q: (B, H, T, D), k, v: (B, H, L, D), mask bool (B|1, 1, T, L) or undefined (causal).
torch::Tensor softcapped_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& mask, double scale, double softcap) {
  const int64_t t = q.size(2), l = k.size(2);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;  // (B, H, T, L)
  scores = torch::tanh(scores / softcap) * softcap;
  torch::Tensor visible = mask;
  if (!visible.defined() && t > 1) {
    visible = torch::ones({t, l}, q.options().dtype(torch::kBool)).tril(l - t);
  }
  if (visible.defined()) scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
  const torch::Tensor weights = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  return torch::matmul(weights, v);  // (B, H, T, D)
}

}  // namespace

SelfAttentionImpl::SelfAttentionImpl(const ModelShape& config, int64_t layer_index)
    : layer_index_(layer_index),
      num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim),
      rotary_dim_(config.rotary_dim()),
      qk_norm_(config.qk_norm),
      rotates_(config.layer_rotates(layer_index)),
      scale_(config.query_pre_attn_scalar > 0 ? std::optional<double>(1.0 / std::sqrt(config.query_pre_attn_scalar))
                                              : std::nullopt),
      softcap_(config.attn_logit_softcapping) {
  if (num_kv_heads_ <= 0 || num_heads_ % num_kv_heads_ != 0) {
    throw ConfigError(detail::concat("model config: num_attention_heads (", num_heads_,
                                     ") must be a multiple of num_key_value_heads (", num_kv_heads_, ")"));
  }
  const int64_t c = config.hidden_size;
  if (config.fused_projections) {
    qkv_proj = register_module("qkv_proj", linear(c, (num_heads_ + 2 * num_kv_heads_) * head_dim_, config.attention_bias));
  } else {
    q_proj = register_module("q_proj", linear(c, num_heads_ * head_dim_, config.attention_bias));
    k_proj = register_module("k_proj", linear(c, num_kv_heads_ * head_dim_, config.attention_bias));
    v_proj = register_module("v_proj", linear(c, num_kv_heads_ * head_dim_, config.attention_bias));
  }
  o_proj = register_module("o_proj", linear(num_heads_ * head_dim_, c, config.attention_output_bias));
  if (qk_norm_ != QkNorm::none) {
    const bool whole = qk_norm_ == QkNorm::whole;
    q_norm = register_module("q_norm", RMSNorm(whole ? num_heads_ * head_dim_ : head_dim_, config.rms_norm_eps,
                                               config.norm_weight));
    k_norm = register_module("k_norm", RMSNorm(whole ? num_kv_heads_ * head_dim_ : head_dim_, config.rms_norm_eps,
                                               config.norm_weight));
  }
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                         const torch::Tensor& mask, KvCache* cache) {
  const int64_t b = x.size(0), t = x.size(1);
  const bool training = is_training();
  const int64_t q_width = num_heads_ * head_dim_, kv_width = num_kv_heads_ * head_dim_;
  torch::Tensor q, k, v;
  if (qkv_proj) {  // Phi-3: one projection, split as transformers slices it
    const torch::Tensor qkv = lora_project(qkv_proj, qkv_lora, x, training);
    q = qkv.narrow(-1, 0, q_width);
    k = qkv.narrow(-1, q_width, kv_width);
    v = qkv.narrow(-1, q_width + kv_width, kv_width);
  } else {
    q = lora_project(q_proj, q_lora, x, training);  // (B, T, H * D)
    k = lora_project(k_proj, k_lora, x, training);  // (B, T, n_kv * D)
    v = lora_project(v_proj, v_lora, x, training);
  }
  if (qk_norm_ == QkNorm::whole) {  // OLMo 2: over the whole projection, before the heads are split
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.reshape({b, t, num_heads_, head_dim_});
  k = k.reshape({b, t, num_kv_heads_, head_dim_});
  if (qk_norm_ == QkNorm::per_head) {  // Qwen3, Gemma 3: each head normalised over D before RoPE
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.transpose(1, 2);  // (B, H, T, D)
  k = k.transpose(1, 2);  // (B, n_kv, T, D)
  v = v.reshape({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (rotates_) {  // SmolLM3's NoPE layers use no position embedding at all
    q = rotate(q, cos, sin);
    k = rotate(k, cos, sin);
  }
  if (cache != nullptr) std::tie(k, v) = cache->append(layer_index_, k, v);  // (B, n_kv, L, D)
  const int64_t repeats = num_heads_ / num_kv_heads_;
  if (softcap_ <= 0 && t == 1 && repeats > 1) {
    // A decode step: the `repeats` query heads of one key/value head attend as `repeats` queries
    // of that head, so its keys and values are read in place instead of copied per query head
    // (head h uses key/value head h / repeats, as repeat_kv lays them out).
    const torch::Tensor grouped = q.reshape({b, num_kv_heads_, repeats, head_dim_});
    const torch::Tensor out = at::scaled_dot_product_attention(
        grouped, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt, 0.0, false, scale_);  // (B, n_kv, repeats, D)
    return lora_project(o_proj, o_lora, out.reshape({b, 1, num_heads_ * head_dim_}), training);
  }
  k = repeat_kv(k, repeats);  // (B, H, L, D)
  v = repeat_kv(v, repeats);
  torch::Tensor out;
  if (softcap_ > 0) {
    out = softcapped_attention(q, k, v, mask, scale_.value_or(1.0 / std::sqrt(static_cast<double>(head_dim_))), softcap_);
  } else {
    const bool causal = !mask.defined() && t > 1;
    out = at::scaled_dot_product_attention(q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt, 0.0,
                                           causal, scale_);  // (B, H, T, D)
  }
  return lora_project(o_proj, o_lora, out.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}), training);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelShape& config, int64_t layer_index)
    : placement_(config.norm_placement), slides_(config.layer_slides(layer_index)) {
  const auto norm = [&](const std::string& name) {
    return register_module(name, RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_weight));
  };
  if (placement_ != NormPlacement::post) input_layernorm = norm("input_layernorm");
  self_attn = register_module("self_attn", SelfAttention(config, layer_index));
  post_attention_layernorm = norm("post_attention_layernorm");
  if (placement_ == NormPlacement::sandwich) pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
  if (config.layer_has_experts(layer_index)) {
    if (config.moe.naming == ExpertNaming::mixtral) mlp_name_ = "block_sparse_moe";
    moe = register_module(mlp_name_, SparseMoeBlock(config, layer_index));
  } else {
    mlp = register_module("mlp", GatedMlp(config, config.intermediate_size));
  }
  if (placement_ != NormPlacement::pre) post_feedforward_layernorm = norm("post_feedforward_layernorm");
}

std::vector<LayerProjection> DecoderLayerImpl::projections() {
  auto& a = *self_attn;
  std::vector<LayerProjection> out;
  const auto add = [&](const std::string& name, torch::nn::Linear& linear, LoraAdapter& adapter) {
    if (linear) out.push_back({name, &linear, &adapter});
  };
  add("self_attn.q_proj", a.q_proj, a.q_lora);
  add("self_attn.k_proj", a.k_proj, a.k_lora);
  add("self_attn.v_proj", a.v_proj, a.v_lora);
  add("self_attn.qkv_proj", a.qkv_proj, a.qkv_lora);
  add("self_attn.o_proj", a.o_proj, a.o_lora);
  const auto add_mlp = [&](const std::string& prefix, GatedMlpImpl& m) {
    const MlpNames& n = m.names();
    add(prefix + n.gate, m.gate_proj, m.gate_lora);
    add(prefix + n.up, m.up_proj, m.up_lora);
    add(prefix + "gate_up_proj", m.gate_up_proj, m.gate_up_lora);
    add(prefix + n.down, m.down_proj, m.down_lora);
  };
  if (mlp) {
    add_mlp("mlp.", *mlp);
  } else {
    const std::string block = mlp_name_ + ".";
    add(block + "gate", moe->gate, moe->gate_lora);
    for (size_t e = 0; e < moe->expert_mlps.size(); ++e) {
      add_mlp(block + "experts." + std::to_string(e) + ".", *moe->expert_mlps[e]);
    }
    if (moe->shared_expert) add_mlp(block + "shared_expert.", *moe->shared_expert);
  }
  return out;
}

torch::Tensor DecoderLayerImpl::feed_forward(const torch::Tensor& x) { return mlp ? mlp(x) : moe(x); }

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const LayerInputs& inputs, KvCache* cache) {
  const bool own_rope = slides_ && inputs.sliding_cos.defined();
  const torch::Tensor& cos = own_rope ? inputs.sliding_cos : inputs.cos;
  const torch::Tensor& sin = own_rope ? inputs.sliding_sin : inputs.sin;
  const torch::Tensor& mask = slides_ ? inputs.sliding_mask : inputs.mask;
  switch (placement_) {
    case NormPlacement::pre: {
      const torch::Tensor h = x + self_attn(input_layernorm(x), cos, sin, mask, cache);
      return h + feed_forward(post_attention_layernorm(h));
    }
    case NormPlacement::sandwich: {
      const torch::Tensor h = x + post_attention_layernorm(self_attn(input_layernorm(x), cos, sin, mask, cache));
      return h + post_feedforward_layernorm(feed_forward(pre_feedforward_layernorm(h)));
    }
    case NormPlacement::post: {
      const torch::Tensor h = x + post_attention_layernorm(self_attn(x, cos, sin, mask, cache));
      return h + post_feedforward_layernorm(feed_forward(h));
    }
  }
  FERRY_CHECK(false, "unknown norm placement");
  return {};
}

}  // namespace ferry
