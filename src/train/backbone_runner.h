// BackboneRunner: runs a Llama-family model group by group (embedding, each decoder layer, final
// norm + head) for training, so that the parameter engine's hooks run around every group and
// activation checkpointing can wrap each layer (and every group whose parameters the engine pages,
// embedding and head included: ParameterEngine::needs_recompute). Objectives call it instead of
// model->forward.
// Batches arrive as CPU tensors; the runner moves them to the model's device.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "offload/engine.h"
#include "src/model/llama_heads.h"

namespace ferry {

class BackboneRunner {
 public:
  BackboneRunner(ParameterEngine& engine, bool activation_checkpointing)
      : engine_(engine), checkpointing_(activation_checkpointing) {}

  // Arguments as LlamaModel::forward (attention_mask (B, T) 1/0 or a bool (B, 1, T, T) mask with
  // position_ids). `model` is the name given to the engine's add_model.
  // Returns logits (B, T, V) in the model's dtype; with `first_column`/`columns`, only those columns'
  // logits (B, columns, V) — the head never sees the others (RL scores only the response).
  torch::Tensor causal_lm(const std::string& model, LlamaForCausalLMImpl& lm, const torch::Tensor& input_ids,
                          const torch::Tensor& attention_mask, const torch::Tensor& position_ids,
                          int64_t first_column = 0, int64_t columns = -1);
  // Returns one value per token (B, T) in the model's dtype (reward models, critics).
  torch::Tensor score(const std::string& model, LlamaForScoreImpl& scorer, const torch::Tensor& input_ids,
                      const torch::Tensor& attention_mask, const torch::Tensor& position_ids);

  bool activation_checkpointing() const { return checkpointing_; }

 private:
  // Embedding and decoder layers; returns the last layer's output (B, T, C), before the final norm.
  torch::Tensor layers(const std::string& model, LlamaModelImpl& backbone, const torch::Tensor& input_ids,
                       const torch::Tensor& attention_mask, const torch::Tensor& position_ids);

  // Whether the group's forward is recomputed in backward: decoder layers under
  // train.gradient_checkpointing, and every group the engine pages.
  bool recomputes(const GroupRef& group, bool decoder_layer) const;
  // fn(input) between the engine's hooks, checkpointed when recomputes() says so.
  torch::Tensor run_group(const GroupRef& group, bool decoder_layer,
                          const std::function<torch::Tensor(const torch::Tensor&)>& fn, const torch::Tensor& input);

  ParameterEngine& engine_;
  bool checkpointing_;
};

}  // namespace ferry
