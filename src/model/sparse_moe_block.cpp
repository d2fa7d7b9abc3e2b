// The Mixture-of-Experts MLP: router, top-k, tokens grouped by expert (see sparse_moe_block.h).
#include "src/model/sparse_moe_block.h"

#include "src/model/router_load.h"

namespace ferry {

SparseMoeBlockImpl::SparseMoeBlockImpl(const ModelShape& config, int64_t layer_index)
    : layer_index_(layer_index),
      num_experts_(config.moe.num_experts),
      top_k_(config.moe.experts_per_token),
      normalize_(config.moe.normalize_top_k) {
  const int64_t c = config.hidden_size;
  gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(c, num_experts_).bias(false)));
  const MlpNames names = config.moe.naming == ExpertNaming::mixtral ? MlpNames{"w1", "w3", "w2"} : MlpNames{};
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < num_experts_; ++e) {
    expert_mlps.push_back(GatedMlp(config, config.moe.expert_intermediate_size, names));
    experts->push_back(expert_mlps.back());
  }
  if (config.moe.shared_expert_intermediate_size > 0) {
    shared_expert = register_module("shared_expert", GatedMlp(config, config.moe.shared_expert_intermediate_size));
    shared_expert_gate = register_module("shared_expert_gate", torch::nn::Linear(torch::nn::LinearOptions(c, 1).bias(false)));
  }
}

torch::Tensor SparseMoeBlockImpl::router_logits(const torch::Tensor& x) {
  return lora_project(gate, gate_lora, x.reshape({-1, x.size(-1)}), is_training());  // (N, E)
}

torch::Tensor SparseMoeBlockImpl::forward(const torch::Tensor& x) {
  const auto shape = x.sizes().vec();
  const torch::Tensor flat = x.reshape({-1, x.size(-1)});  // (N, C)
  const torch::Tensor logits = router_logits(flat);         // (N, E)
  const torch::Tensor probabilities = torch::softmax(logits, -1, torch::kFloat);
  auto [weights, chosen] = torch::topk(probabilities, top_k_, -1);  // (N, k)
  if (normalize_) weights = weights / weights.sum(-1, true);
  weights = weights.to(x.scalar_type());

  // Group the (token, choice) pairs by expert: one sort, one host read of the counts.
  const torch::Tensor flat_choice = chosen.reshape({-1});  // (N * k)
  const torch::Tensor order = flat_choice.argsort(/*stable=*/true);
  const torch::Tensor counts = torch::bincount(flat_choice, {}, num_experts_).to(torch::kCPU);
  const torch::Tensor tokens = order.div(top_k_, "floor");  // the token of each sorted pair
  const torch::Tensor pair_weights = weights.reshape({-1}).index_select(0, order);
  const int64_t* count = counts.data_ptr<int64_t>();
  torch::Tensor out = torch::zeros_like(flat);
  int64_t start = 0;
  for (int64_t e = 0; e < num_experts_; ++e) {
    const int64_t n = count[e];
    if (n == 0) continue;
    const torch::Tensor rows = tokens.narrow(0, start, n);
    const torch::Tensor expert_out = expert_mlps[static_cast<size_t>(e)]->forward(flat.index_select(0, rows));
    out = out.index_add(0, rows, expert_out * pair_weights.narrow(0, start, n).unsqueeze(-1));
    start += n;
  }
  if (shared_expert) {
    out = out + torch::sigmoid(shared_expert_gate(flat)) * shared_expert->forward(flat);
  }
  if (load_ != nullptr) out = load_->record(layer_index_, out, logits, probabilities, chosen);
  return out.reshape(shape);
}

}  // namespace ferry
