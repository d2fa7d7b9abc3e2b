// The config.json keys of the Mixture-of-Experts families (Qwen2-MoE, Qwen3-MoE, Mixtral, OLMoE),
// read into and written from ModelShape::moe: how many experts, how many a token runs, their width,
// top-k renormalisation, which layers are sparse (decoder_sparse_step, mlp_only_layers), the
// shared expert, and the router's load-balancing loss (router_aux_loss_coef, output_router_logits).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "core/config/model_shape.h"

namespace ferry {

class ConfigKeys;

// What one family's config class calls its keys and assumes when they are absent.
struct MoeKeys {
  std::string width_key = "moe_intermediate_size";  // Mixtral, OLMoE: intermediate_size (the experts' width)
  int64_t num_experts = 0;                           // the class's defaults
  int64_t experts_per_token = 0;
  int64_t width = 0;
  bool normalize_key = true;     // the class reads norm_topk_prob (Mixtral: always renormalises)
  bool normalize = false;        // its default (Mixtral: true)
  bool sparse_step_keys = true;  // decoder_sparse_step and mlp_only_layers (Qwen2/3-MoE)
  bool shared_expert = false;    // shared_expert_intermediate_size (Qwen2-MoE)
  int64_t shared_width = 0;
  double aux_loss_coef = 0.001;
};

// Reads the keys into config.moe (num_experts or num_local_experts: transformers maps one to the
// other). ConfigError naming the key for a bad value (experts_per_token > num_experts, an
// mlp_only_layers index out of range, ...).
void read_moe_keys(const ConfigKeys& keys, const MoeKeys& names, ModelShape& config);
// Writes config.moe as the family's keys; UserError when the family cannot express it.
void write_moe_keys(const ModelShape& config, const MoeKeys& names, const std::string& family, nlohmann::json& out);

}  // namespace ferry
