// The shape of a decoder-only transformer, as a Hugging Face config.json or a GGUF file describes
// it, resolved into the switches Ferry's one decoder block reads (src/model/decoder_layer.h).
// Torch-free, so the planner and the CLI can use it cheaply. Which family a config belongs to, how
// its config.json keys and GGUF metadata map to these fields, and which tensors it has, is that
// family's description (src/model/family/): nothing else names a family.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

enum class RopeScalingType { none, linear, llama3, longrope, yarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;  // longrope: 0 when config.json gives none (then max_position_embeddings / original)
  // llama3 only:
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;  // llama3 and longrope
  // longrope only (Phi-3, Phi-4-mini): per-frequency divisors, rotary_dim / 2 each. A forward whose
  // largest position + 1 exceeds original_max_position_embeddings uses long_factor, else short_factor.
  std::vector<double> long_factor, short_factor;
  double attention_factor = 0;  // cos and sin are scaled by it; 0: from the factor (see rope_attention_scaling)
  // yarn only (OLMo 3's long-context layers, gpt-oss, DeepSeek): the ramp between extrapolated and
  // interpolated frequencies (original_max_position_embeddings and factor as above).
  double beta_fast = 32, beta_slow = 1;
  bool truncate = true;             // the correction range rounded outwards
  double mscale = 0, mscale_all_dim = 0;  // both > 0: attention_factor = mscale(factor, mscale) / mscale(factor, all_dim)
};

// Where a block's RMSNorms sit.
enum class NormPlacement {
  pre,       // x + attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x))   (Llama, Qwen, Mistral)
  sandwich,  // x + post_attention_layernorm(attn(input_layernorm(x)));
             // x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))  (Gemma 2, Gemma 3)
  post,      // x + post_attention_layernorm(attn(x)); x + post_feedforward_layernorm(mlp(x))  (OLMo 2, OLMo 3)
};

// How an RMSNorm applies its weight.
enum class NormWeight {
  plain,     // w * normalise(x)                    (Llama: normalised in fp32, cast, then scaled)
  one_plus,  // (1 + w) * normalise(x), all in fp32 (Gemma)
};

// RMSNorms on the queries and keys, before RoPE.
enum class QkNorm {
  none,
  per_head,  // over head_dim, every head (Qwen3, Gemma 3): self_attn.q_norm.weight (head_dim)
  whole,     // over the whole projection (OLMo 2): self_attn.q_norm.weight (heads x head_dim)
};

enum class MlpActivation { silu, gelu_tanh };

// Which attention a layer runs.
enum class AttentionKind { full, sliding };

// How a Mixture-of-Experts layer's parameters are named (the rest of the layer is named as usual).
enum class ExpertNaming {
  mlp,       // mlp.gate.weight; mlp.experts.N.{gate,up,down}_proj.weight  (Qwen2/3-MoE, OLMoE)
  mixtral,   // block_sparse_moe.gate.weight; block_sparse_moe.experts.N.{w1,w3,w2}.weight  (Mixtral)
};

// The Mixture-of-Experts part of a shape: a sparse layer's MLP is a router (a linear map from the
// hidden state to one logit per expert) and `num_experts` gated MLPs, of which each token runs
// `experts_per_token`, their outputs weighted by the router's probabilities (transformers'
// <Family>SparseMoeBlock). num_experts 0: a dense model.
struct MoeShape {
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;        // top-k
  int64_t expert_intermediate_size = 0;  // each expert's MLP width (moe_intermediate_size; Mixtral: intermediate_size)
  bool normalize_top_k = false;          // the top-k probabilities renormalised to sum to 1 (norm_topk_prob)
  int64_t shared_expert_intermediate_size = 0;  // > 0: a shared MLP every token runs, gated by sigmoid (Qwen2-MoE)
  // Per layer: true where the MLP is sparse. Empty: every layer (decoder_sparse_step 1, no mlp_only_layers).
  std::vector<bool> sparse_layers;
  double router_aux_loss_coef = 0.001;  // the load-balancing loss' weight in the training loss
  bool router_aux_loss = false;         // config.json's output_router_logits: training adds coef x the aux loss
  ExpertNaming naming = ExpertNaming::mlp;
};

struct ModelShape {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  // < num_attention_heads: grouped-query attention
  int64_t head_dim = 128;            // usually hidden_size / num_attention_heads
  int64_t max_position_embeddings = 4096;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;       // the full-attention layers' RoPE (all layers unless sliding_rope_theta)
  RopeScaling rope_scaling;
  double sliding_rope_theta = 0;     // > 0: sliding layers use plain RoPE with this base (Gemma 3's local base)
  double partial_rotary_factor = 1.0;  // RoPE rotates the first head_dim * factor channels of each head
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (Qwen2-style has q/k/v only; see attention_output_bias)
  bool attention_output_bias = false;
  bool mlp_bias = false;
  QkNorm qk_norm = QkNorm::none;
  // Phi-3: one self_attn.qkv_proj (q, k, v rows stacked) and one mlp.gate_up_proj (gate rows, then
  // up rows) instead of separate projections; LoRA adapts the fused ones, as PEFT does.
  bool fused_projections = false;
  NormPlacement norm_placement = NormPlacement::pre;
  NormWeight norm_weight = NormWeight::plain;
  MlpActivation mlp_activation = MlpActivation::silu;
  bool scale_embeddings = false;     // Gemma: embeddings times sqrt(hidden_size), in the weights' dtype
  double query_pre_attn_scalar = 0;  // > 0: attention scores scaled by its -1/2 instead of head_dim's (Gemma)
  double attn_logit_softcapping = 0;   // > 0: scores -> cap * tanh(scores / cap) before the mask (Gemma 2)
  double final_logit_softcapping = 0;  // > 0: logits -> cap * tanh(logits / cap) (Gemma 2)
  int64_t sliding_window = 0;    // a sliding layer's query attends the last `sliding_window` keys (itself included)
  // Per layer: which attention it runs. Empty: every layer is sliding when sliding_window > 0
  // (Mistral), else full.
  std::vector<AttentionKind> layer_types;
  // Per layer: false where the layer uses no position embedding at all (SmolLM3's NoPE layers).
  // Empty: every layer rotates.
  std::vector<bool> rope_layers;
  int64_t bos_token_id = 1;
  std::vector<int64_t> eos_token_ids{2};
  int64_t pad_token_id = -1;  // -1: none
  MoeShape moe;
  std::string torch_dtype = "float32";
  std::string model_type = "llama";  // config.json's model_type: picks the family (src/model/family/)

  bool layer_slides(int64_t layer) const {
    if (sliding_window <= 0) return false;
    if (layer_types.empty()) return true;
    return layer_types.at(static_cast<size_t>(layer)) == AttentionKind::sliding;
  }
  bool any_layer_slides() const {
    for (int64_t i = 0; i < num_hidden_layers; ++i) {
      if (layer_slides(i)) return true;
    }
    return false;
  }
  bool every_layer_slides() const {
    for (int64_t i = 0; i < num_hidden_layers; ++i) {
      if (!layer_slides(i)) return false;
    }
    return num_hidden_layers > 0;
  }
  bool layer_rotates(int64_t layer) const {
    return rope_layers.empty() || rope_layers.at(static_cast<size_t>(layer));
  }
  bool has_experts() const { return moe.num_experts > 0; }
  // Is layer `layer`'s MLP a Mixture of Experts?
  bool layer_has_experts(int64_t layer) const {
    if (moe.num_experts <= 0) return false;
    return moe.sparse_layers.empty() || moe.sparse_layers.at(static_cast<size_t>(layer));
  }
  // Channels of a head that RoPE rotates (even).
  int64_t rotary_dim() const {
    const auto dim = static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
    return dim - dim % 2;
  }
  // What cos and sin are multiplied by, as transformers resolves it: longrope's
  // (_compute_longrope_parameters) and yarn's (_compute_yarn_parameters) attention factor; 1 for
  // the other rope types.
  double rope_attention_scaling() const {
    const RopeScaling& s = rope_scaling;
    if (s.type != RopeScalingType::longrope && s.type != RopeScalingType::yarn) return 1.0;
    if (s.attention_factor > 0) return s.attention_factor;
    const double original = static_cast<double>(s.original_max_position_embeddings);
    const double factor = s.factor > 0 ? s.factor : static_cast<double>(max_position_embeddings) / original;
    if (s.type == RopeScalingType::longrope) {
      return factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(original));
    }
    const auto yarn_mscale = [&](double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
    if (s.mscale > 0 && s.mscale_all_dim > 0) return yarn_mscale(s.mscale) / yarn_mscale(s.mscale_all_dim);
    return yarn_mscale(1.0);
  }
  // Does a sliding layer use other RoPE tables than a full one?
  bool sliding_layers_own_rope() const { return sliding_rope_theta > 0 && any_layer_slides(); }
};

}  // namespace ferry
