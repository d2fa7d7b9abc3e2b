// The decoder block every family is built from, and its parts, switched by the ModelShape its
// family's description filled (src/model/family/): grouped-query self-attention with RoPE (whole
// or partial heads, none on NoPE layers), optional q/k RMSNorms (per head or over the projection),
// a sliding window per layer, query_pre_attn_scalar and score soft-capping; the gated MLP (SwiGLU
// or GeGLU), its projections separate or fused (Phi-3's qkv_proj and gate_up_proj); and the residual layer with its norms before (Llama), around (Gemma) or after (OLMo 2)
// attention and MLP; in a Mixture-of-Experts layer, the MLP is the router and experts
// (sparse_moe_block.h). Parameter names follow Hugging Face (`self_attn.q_proj.weight`,
// `mlp.gate_proj.weight`, `input_layernorm.weight`, `pre_feedforward_layernorm.weight`, ...), as the
// family's tensor list names them (src/model/family/model_tensors.h).
//
// Looking ahead: the offload engine pages one decoder layer's parameters in and out as a chunk,
// and activation checkpointing re-runs one layer's forward in backward. So a layer is a
// self-contained module (it owns every parameter it uses) and its forward takes only tensors;
// the optional KV cache is used by generation only, never in training. Each projection may carry a
// LoRA adapter (lora_linear.h; attached by src/model/lora.h), empty unless LoRA is on.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "core/config/model_shape.h"
#include "src/model/gated_mlp.h"
#include "src/model/lora_linear.h"
#include "src/model/rms_norm.h"
#include "src/model/sparse_moe_block.h"

namespace ferry {

class KvCache;

// One projection of a decoder layer and its LoRA adapter: `name` is its module path under
// model.layers.<i>. ("self_attn.q_proj", "mlp.gate_up_proj"); its last part is the LoRA target name.
struct LayerProjection {
  std::string name;
  torch::nn::Linear* linear;
  LoraAdapter* adapter;
};

// What every decoder layer of one forward shares: RoPE tables and attention masks, one set for the
// full-attention layers and one for the sliding-window layers.
struct LayerInputs {
  torch::Tensor cos, sin;  // (B, T, rotary_dim) in the activation dtype: full layers (and all, by default)
  torch::Tensor sliding_cos, sliding_sin;  // the sliding layers' own tables (Gemma 3), or undefined: cos, sin
  torch::Tensor mask;          // bool (B|1, 1, T, T_key), or undefined: causal
  torch::Tensor sliding_mask;  // the same with the sliding window applied (sliding layers)
};

class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(const ModelShape& config, int64_t layer_index);

  // x: (B, T, C); cos/sin: (B, T, rotary_dim); mask: bool (B|1, 1, T, T_key) or undefined (causal).
  // With a cache, this step's keys/values are appended and attention covers the cached ones.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, KvCache* cache = nullptr);

  // Separate q/k/v projections, or (config.fused_projections, Phi-3) one qkv_proj whose rows are
  // the queries', then the keys', then the values'.
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, qkv_proj{nullptr}, o_proj{nullptr};
  LoraAdapter q_lora, k_lora, v_lora, qkv_lora, o_lora;
  // q/k RMSNorms (config.qk_norm), after the projection and before RoPE (`self_attn.q_norm.weight`):
  // over head_dim of every head (Qwen3, Gemma 3) or over the whole projection (OLMo 2); empty for
  // the other families.
  RMSNorm q_norm{nullptr}, k_norm{nullptr};

 private:
  int64_t layer_index_;
  int64_t num_heads_, num_kv_heads_, head_dim_, rotary_dim_;
  QkNorm qk_norm_;
  bool rotates_;
  // The scores' scale: query_pre_attn_scalar^-1/2 (Gemma), or nullopt: SDPA's own head_dim^-1/2
  // (bit for bit as before for the other families).
  std::optional<double> scale_;
  double softcap_;  // > 0: scores -> softcap * tanh(scores / softcap)
};
TORCH_MODULE(SelfAttention);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelShape& config, int64_t layer_index);

  // x: (B, T, C) -> (B, T, C); this layer takes its tables and mask from `inputs` (sliding or full).
  torch::Tensor forward(const torch::Tensor& x, const LayerInputs& inputs, KvCache* cache = nullptr);

  bool slides() const { return slides_; }
  // The layer's MLP: mlp(x), or the experts' (moe) in a sparse layer.
  torch::Tensor feed_forward(const torch::Tensor& x);
  // The layer's projections that exist, in the order of the family's tensor list (a sparse layer:
  // the router, every expert's, the shared expert's).
  std::vector<LayerProjection> projections();

  // Present as the config's norm placement says (NormPlacement): input_layernorm (pre, sandwich),
  // post_attention_layernorm (all: before the MLP for `pre`, after attention otherwise),
  // pre_feedforward_layernorm (sandwich), post_feedforward_layernorm (sandwich, post).
  RMSNorm input_layernorm{nullptr};
  SelfAttention self_attn{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
  RMSNorm pre_feedforward_layernorm{nullptr};
  GatedMlp mlp{nullptr};        // a dense layer's MLP
  SparseMoeBlock moe{nullptr};  // a sparse layer's (ModelShape::layer_has_experts), registered as `mlp`
                                // (Mixtral: `block_sparse_moe`)
  RMSNorm post_feedforward_layernorm{nullptr};

 private:
  NormPlacement placement_;
  bool slides_;
  std::string mlp_name_ = "mlp";  // the MLP's module name (Mixtral's sparse layers: block_sparse_moe)
};
TORCH_MODULE(DecoderLayer);

}  // namespace ferry
