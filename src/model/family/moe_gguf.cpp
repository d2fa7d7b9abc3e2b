// GGUF metadata of the Mixture-of-Experts families (see moe_gguf.h).
#include "src/model/family/moe_gguf.h"

#include "src/model/family/family_switches.h"
#include "src/model/family/gguf_metadata.h"

namespace ferry {

void read_moe_gguf(const GgufMetadata& metadata, const MoeGgufRules& rules, ModelShape& c) {
  const std::string p = "metadata '" + metadata.architecture() + ".";
  const int64_t experts = metadata.get_int("expert_count", 0);
  if (experts <= 0 || experts > 65536) {
    metadata.fail(p + "expert_count' is " + std::to_string(experts) + "; a " + rules.architecture +
                  " model needs its number of experts (1 to 65536)");
  }
  const int64_t used = metadata.get_int("expert_used_count", 0);
  if (used <= 0 || used > experts) {
    metadata.fail(p + "expert_used_count' is " + std::to_string(used) + "; it must be 1 to expert_count (" +
                  std::to_string(experts) + ")");
  }
  MoeShape& moe = c.moe;
  moe.num_experts = experts;
  moe.experts_per_token = used;
  // llama.cpp: n_ff_exp = expert_feed_forward_length, or n_ff / n_expert_used without it.
  moe.expert_intermediate_size = rules.expert_width_key
                                     ? metadata.get_int("expert_feed_forward_length", c.intermediate_size / used)
                                     : c.intermediate_size;
  if (moe.expert_intermediate_size <= 0 || moe.expert_intermediate_size > (int64_t{1} << 24)) {
    metadata.fail(p + "expert_feed_forward_length' is " + std::to_string(moe.expert_intermediate_size) +
                  ", not a plausible expert width; the file is corrupt");
  }
  moe.shared_expert_intermediate_size = 0;
  if (rules.shared_expert) {
    moe.shared_expert_intermediate_size = metadata.get_int("expert_shared_feed_forward_length", c.intermediate_size);
    if (moe.shared_expert_intermediate_size <= 0 || moe.shared_expert_intermediate_size > (int64_t{1} << 24)) {
      metadata.fail(p + "expert_shared_feed_forward_length' is " + std::to_string(moe.shared_expert_intermediate_size) +
                    ", not a plausible width; the file is corrupt");
    }
  }
  moe.normalize_top_k = rules.normalize_top_k;
  moe.sparse_layers.clear();  // llama.cpp's architectures have experts in every layer
  moe.router_aux_loss_coef = rules.aux_loss_coef;
  moe.router_aux_loss = false;
}

std::vector<GgufKey> write_moe_gguf(const ModelShape& c, const MoeGgufRules& rules) {
  const std::string& arch = rules.architecture;
  const MoeShape& moe = c.moe;
  require_llama_cpp(c.has_experts(), arch, "a Mixture of Experts (expert_count > 0)");
  require_llama_cpp(moe.sparse_layers.empty(), arch,
                    "experts in every layer (no mlp_only_layers, decoder_sparse_step 1)");
  require_llama_cpp(moe.normalize_top_k == rules.normalize_top_k, arch,
                    rules.normalize_top_k ? "the chosen experts' weights renormalised to sum to 1 (norm_topk_prob true)"
                                          : "the chosen experts' softmax weights as they are (norm_topk_prob false)");
  require_llama_cpp(rules.shared_expert == (moe.shared_expert_intermediate_size > 0), arch,
                    rules.shared_expert ? "a shared expert in every layer" : "no shared expert");
  require_llama_cpp(!rules.needs_output || !c.tie_word_embeddings, arch,
                    "an output.weight of its own (tie_word_embeddings false)");
  require_llama_cpp(!rules.square_attention || c.num_attention_heads * c.head_dim == c.hidden_size, arch,
                    "queries of hidden_size (num_attention_heads x head_dim = hidden_size)");
  require_llama_cpp(!rules.full_kv_heads || c.num_key_value_heads == c.num_attention_heads, arch,
                    "a key norm hidden_size wide (num_key_value_heads = num_attention_heads)");
  require_llama_cpp(rules.expert_width_key || moe.expert_intermediate_size == c.intermediate_size, arch,
                    "experts feed_forward_length wide (intermediate_size)");
  std::vector<GgufKey> keys{{"expert_count", GgufKey::Type::u32, static_cast<double>(moe.num_experts)},
                            {"expert_used_count", GgufKey::Type::u32, static_cast<double>(moe.experts_per_token)}};
  if (rules.expert_width_key) {
    keys.push_back({"expert_feed_forward_length", GgufKey::Type::u32, static_cast<double>(moe.expert_intermediate_size)});
  }
  if (rules.shared_expert) {
    keys.push_back({"expert_shared_feed_forward_length", GgufKey::Type::u32,
                    static_cast<double>(moe.shared_expert_intermediate_size)});
  }
  return keys;
}

}  // namespace ferry
