// config.json keys of the Mixture-of-Experts families (see moe_keys.h).
#include "src/model/family/moe_keys.h"

#include <nlohmann/json.hpp>

#include "src/model/family/config_keys.h"
#include "src/model/family/family_switches.h"

namespace ferry {

void read_moe_keys(const ConfigKeys& keys, const MoeKeys& names, ModelShape& c) {
  MoeShape& moe = c.moe;
  const std::string experts_key = keys.has("num_experts") ? "num_experts" : "num_local_experts";
  moe.num_experts = keys.positive_int(experts_key, names.num_experts);
  moe.experts_per_token = keys.positive_int("num_experts_per_tok", names.experts_per_token);
  if (moe.experts_per_token > moe.num_experts) {
    keys.fail("num_experts_per_tok", "(" + std::to_string(moe.experts_per_token) + ") is more than " + experts_key +
                                         " (" + std::to_string(moe.num_experts) + ")");
  }
  moe.expert_intermediate_size = keys.positive_int(names.width_key, names.width);
  moe.normalize_top_k = names.normalize_key ? keys.boolean("norm_topk_prob", names.normalize) : names.normalize;
  moe.router_aux_loss_coef = keys.has("router_aux_loss_coef") ? keys.object().at("router_aux_loss_coef").get<double>()
                                                               : names.aux_loss_coef;
  if (!(moe.router_aux_loss_coef >= 0)) keys.fail("router_aux_loss_coef", "must be >= 0");
  moe.router_aux_loss = keys.boolean("output_router_logits", false);
  if (names.shared_expert) {
    moe.shared_expert_intermediate_size = keys.positive_int("shared_expert_intermediate_size", names.shared_width);
  }
  moe.sparse_layers.clear();
  if (!names.sparse_step_keys) return;
  const int64_t step = keys.positive_int("decoder_sparse_step", 1);
  std::vector<bool> sparse(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) sparse[static_cast<size_t>(i)] = (i + 1) % step == 0;
  if (keys.has("mlp_only_layers")) {
    const nlohmann::json& dense = keys.object().at("mlp_only_layers");
    if (!dense.is_array()) keys.fail("mlp_only_layers", "must be a list of layer indices, got " + dense.dump());
    for (const nlohmann::json& index : dense) {
      if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() >= c.num_hidden_layers) {
        keys.fail("mlp_only_layers", "holds " + index.dump() + ", not a layer index (0 to num_hidden_layers - 1 = " +
                                         std::to_string(c.num_hidden_layers - 1) + ")");
      }
      sparse[index.get<size_t>()] = false;
    }
  }
  bool all = true;
  for (const bool s : sparse) all = all && s;
  if (!all) moe.sparse_layers = std::move(sparse);
}

void write_moe_keys(const ModelShape& c, const MoeKeys& names, const std::string& family, nlohmann::json& out) {
  const MoeShape& moe = c.moe;
  require_expressible(moe.num_experts > 0, family, "no experts (a dense MLP in every layer)");
  require_expressible(names.normalize_key || moe.normalize_top_k == names.normalize, family,
                      "top-k probabilities that are not renormalised (Mixtral always renormalises)");
  require_expressible(names.shared_expert || moe.shared_expert_intermediate_size == 0, family,
                      "a shared expert (only model_type qwen2_moe has one)");
  require_expressible(names.sparse_step_keys || moe.sparse_layers.empty(), family, "dense MLP layers between sparse ones");
  out["num_experts"] = moe.num_experts;
  out["num_local_experts"] = moe.num_experts;
  out["num_experts_per_tok"] = moe.experts_per_token;
  if (names.width_key == "intermediate_size") {
    require_expressible(moe.expert_intermediate_size == c.intermediate_size || c.moe.sparse_layers.empty(), family,
                        "dense layers of another width than the experts");
    out["intermediate_size"] = moe.expert_intermediate_size;
  } else {
    out[names.width_key] = moe.expert_intermediate_size;
  }
  if (names.normalize_key) out["norm_topk_prob"] = moe.normalize_top_k;
  out["router_aux_loss_coef"] = moe.router_aux_loss_coef;
  out["output_router_logits"] = moe.router_aux_loss;
  if (names.shared_expert) out["shared_expert_intermediate_size"] = moe.shared_expert_intermediate_size;
  if (!names.sparse_step_keys) return;
  // mlp_only_layers lists every dense layer; decoder_sparse_step 1 makes the rest sparse.
  out["decoder_sparse_step"] = 1;
  nlohmann::json dense = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (!c.layer_has_experts(i)) dense.push_back(i);
  }
  out["mlp_only_layers"] = dense;
}

}  // namespace ferry
