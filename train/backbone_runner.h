// BackboneRunner: runs a Llama-family model group by group (embedding, each decoder layer, final
// norm + head) for training, so that the parameter engine's hooks run around every group and
// activation checkpointing can wrap each layer (and every group whose parameters the engine pages,
// embedding and head included: ParameterEngine::needs_recompute). Objectives call it instead of
// model->forward.
// Batches arrive as CPU tensors; the runner moves them to the model's device.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops/chunked_lm_head.h"
#include "offload/engine.h"
#include "src/metrics/metrics_row.h"
#include "src/model/model_heads.h"
#include "src/model/router_load.h"

namespace ferry {

class BackboneRunner {
 public:
  // logits_chunk (train.logits_chunk): rows of logits the LM-head losses compute at a time
  // (kernels/ops/chunked_lm_head.h); -1 sizes the chunks automatically; 0 computes all the logits
  // at once.
  BackboneRunner(offload::ParameterEngine& engine, bool activation_checkpointing, int64_t logits_chunk = 0)
      : engine_(engine), checkpointing_(activation_checkpointing), logits_chunk_(logits_chunk) {}

  // Arguments as DecoderModel::forward (attention_mask (B, T) 1/0 or a bool (B, 1, T, T) mask with
  // position_ids). `model` is the name given to the engine's add_model.
  // Returns logits (B, T, V) in the model's dtype; with `first_column`/`columns`, only those columns'
  // logits (B, columns, V) — the head never sees the others (RL scores only the response).
  torch::Tensor causal_lm(const std::string& model, CausalLMImpl& lm, const torch::Tensor& input_ids,
                          const torch::Tensor& attention_mask, const torch::Tensor& position_ids,
                          int64_t first_column = 0, int64_t columns = -1);
  // What an objective computes from the final hidden states (B, columns, C), after the final norm,
  // the LM head's weight (V, C) (the embedding when tied) and the model's final-logit soft-cap (0:
  // none; else its logits are kernels::soft_cap(hidden · weightᵀ, softcap)). Runs again in backward
  // when the head group is recomputed, so it may read only its arguments and tensors that need no
  // gradient.
  using LmHeadFn =
      std::function<torch::Tensor(const torch::Tensor& hidden, const torch::Tensor& weight, double softcap)>;
  // The backbone, then `head` in the LM head's group at columns [first_column, first_column + columns).
  torch::Tensor causal_lm_head(const std::string& model, CausalLMImpl& lm, const torch::Tensor& input_ids,
                               const torch::Tensor& attention_mask, const torch::Tensor& position_ids,
                               int64_t first_column, int64_t columns, const LmHeadFn& head);
  // Per-token log-probs of `targets` (B, T') — the ids the positions first_column ..
  // first_column + T' − 1 predict — and the entropy there (when with_entropy): fp32 (B, T'), log-prob
  // 0 where a target is negative. Never more than logits_chunk rows of logits at once.
  kernels::LmHeadTokens token_logprobs(const std::string& model, CausalLMImpl& lm,
                                       const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                       const torch::Tensor& position_ids, const torch::Tensor& targets,
                                       int64_t first_column, double temperature, bool with_entropy);
  // Returns one value per token (B, T) in the model's dtype (reward models, critics).
  torch::Tensor score(const std::string& model, ScoreModelImpl& scorer, const torch::Tensor& input_ids,
                      const torch::Tensor& attention_mask, const torch::Tensor& position_ids);

  // `loss` plus, for a Mixture of Experts (src/model/router_load.h), coef x the load-balancing loss
  // of every forward with gradients since the last call times `share` (the micro-batch's share of
  // the step's loss), for backward: its gradient reaches the routers. `loss` itself when the model
  // has no experts or its config.json leaves output_router_logits off. Call it once per backward.
  torch::Tensor add_router_loss(const torch::Tensor& loss, double share = 1.0);
  // moe_aux_loss (the load-balancing loss, without coef) and moe_load_imbalance (the busiest
  // expert's share of the routed tokens x num_experts: 1 when balanced) of the forwards the last
  // add_router_loss took, each times `weight`; empty for a dense model.
  MetricValues router_metrics(double weight) const;

  bool activation_checkpointing() const { return checkpointing_; }
  int64_t logits_chunk() const { return logits_chunk_; }

 private:
  // Embedding and decoder layers; returns the last layer's output (B, T, C), before the final norm.
  torch::Tensor layers(const std::string& model, DecoderModelImpl& backbone, const torch::Tensor& input_ids,
                       const torch::Tensor& attention_mask, const torch::Tensor& position_ids);

  // Whether the group's forward is recomputed in backward: decoder layers under
  // train.gradient_checkpointing, and every group the engine pages.
  bool recomputes(const offload::GroupRef& group, bool decoder_layer) const;
  // fn(input) between the engine's hooks, checkpointed when recomputes() says so.
  torch::Tensor run_group(const offload::GroupRef& group, bool decoder_layer,
                          const std::function<torch::Tensor(const torch::Tensor&)>& fn, const torch::Tensor& input);

  offload::ParameterEngine& engine_;
  bool checkpointing_;
  int64_t logits_chunk_;
  std::vector<std::shared_ptr<RouterLoad>> pending_loads_, taken_loads_;
};

}  // namespace ferry
