// GGUF metadata of the Mixture-of-Experts families, as llama.cpp's convert_hf_to_gguf.py writes it
// and its architectures read it (qwen3moe, qwen2moe, olmoe; Mixtral is "llama" with experts):
//
//   <arch>.expert_count                        num_experts (Mixtral: num_local_experts)
//   <arch>.expert_used_count                   num_experts_per_tok
//   <arch>.expert_feed_forward_length          moe_intermediate_size (Qwen2/3-MoE; absent: llama.cpp
//                                              takes feed_forward_length / expert_used_count). OLMoE and
//                                              Mixtral: the experts are feed_forward_length wide
//   <arch>.expert_shared_feed_forward_length   shared_expert_intermediate_size (qwen2moe; absent:
//                                              feed_forward_length)
//
// What llama.cpp fixes in its code, not in the file (src/models/<arch>.cpp), a family's rules say:
// whether the top-k expert weights are renormalised (build_moe_ffn's norm_w: qwen3moe and llama
// true, qwen2moe and olmoe false; they do not read <arch>.expert_weights_norm, which the converter
// does not write for them), that every layer is sparse (no mlp_only_layers), and the tensor shapes
// its loader asks for (qwen2moe and olmoe: q and o n_embd x n_embd and output.weight required;
// olmoe: k_norm n_embd wide, so no grouped-query attention). Reading sets ModelShape::moe from the
// keys and those fixed settings; writing refuses a model llama.cpp would run otherwise (UserError
// via require_llama_cpp) and returns the keys.
#pragma once

#include <string>
#include <vector>

#include "core/config/model_shape.h"
#include "src/model/family/model_family.h"

namespace ferry {

class GgufMetadata;

struct MoeGgufRules {
  std::string architecture;         // llama.cpp's: "qwen3moe", "qwen2moe", "olmoe", "llama"
  bool expert_width_key = false;    // expert_feed_forward_length (Qwen); else feed_forward_length
  bool shared_expert = false;       // qwen2moe: a shared expert, expert_shared_feed_forward_length
  bool normalize_top_k = false;     // llama.cpp's norm_w for the architecture
  bool needs_output = false;        // output.weight required: no tied embeddings
  bool square_attention = false;    // q_proj and o_proj n_embd x n_embd: heads x head_dim = hidden
  bool full_kv_heads = false;       // k_norm n_embd wide: num_key_value_heads = num_attention_heads
  double aux_loss_coef = 0.001;     // router_aux_loss_coef of the family's config class (not in GGUF)
};

// Sets config.moe from `metadata` (called by a family's read_gguf after the shared keys are read);
// InputError naming the key for a missing or impossible expert count.
void read_moe_gguf(const GgufMetadata& metadata, const MoeGgufRules& rules, ModelShape& config);

// The family's GGUF keys for config.moe; UserError where llama.cpp would run the model otherwise.
std::vector<GgufKey> write_moe_gguf(const ModelShape& config, const MoeGgufRules& rules);

}  // namespace ferry
