// One Llama decoder block and its parts: grouped-query self-attention with RoPE (and Qwen3's
// per-head q/k norms), the SwiGLU MLP, and the pre-norm residual layer that joins them. Parameter
// names follow Hugging Face (`self_attn.q_proj.weight`, `mlp.gate_proj.weight`,
// `input_layernorm.weight`, `self_attn.q_norm.weight`, ...).
//
// Looking ahead: the offload engine pages one decoder layer's parameters in and out as a chunk,
// and activation checkpointing re-runs one layer's forward in backward. So a layer is a
// self-contained module (it owns every parameter it uses) and its forward takes only tensors;
// the optional KV cache is used by generation only, never in training. Each projection may carry a
// LoRA adapter (lora_linear.h; attached by src/model/lora.h), empty unless LoRA is on.
#pragma once

#include <torch/torch.h>

#include "core/config/llama_config.h"
#include "src/model/lora_linear.h"
#include "src/model/rms_norm.h"

namespace ferry {

class KvCache;

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  LlamaAttentionImpl(const LlamaConfig& config, int64_t layer_index);

  // x: (B, T, C); cos/sin: (B, T, D); mask: bool (B|1, 1, T, T_key) or undefined (causal).
  // With a cache, this step's keys/values are appended and attention covers the cached ones.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, KvCache* cache = nullptr);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  LoraAdapter q_lora, k_lora, v_lora, o_lora;
  // Qwen3 (config.qk_norm): RMSNorm over head_dim of every query and key head, after the
  // projection and before RoPE (`self_attn.q_norm.weight`, (D)); empty for the other families.
  RMSNorm q_norm{nullptr}, k_norm{nullptr};

 private:
  int64_t layer_index_;
  int64_t num_heads_, num_kv_heads_, head_dim_;
};
TORCH_MODULE(LlamaAttention);

// down_proj(silu(gate_proj(x)) * up_proj(x))
class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const LlamaConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (..., C) -> (..., C)

  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  LoraAdapter gate_lora, up_lora, down_lora;
};
TORCH_MODULE(LlamaMlp);

class LlamaDecoderLayerImpl : public torch::nn::Module {
 public:
  LlamaDecoderLayerImpl(const LlamaConfig& config, int64_t layer_index);

  // x: (B, T, C) -> (B, T, C); the other arguments as LlamaAttention::forward.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, KvCache* cache = nullptr);

  RMSNorm input_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
  LlamaMlp mlp{nullptr};
};
TORCH_MODULE(LlamaDecoderLayer);

}  // namespace ferry
