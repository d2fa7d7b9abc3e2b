// The causal-LM loss: mean cross-entropy over label tokens (assistant content and its
// end-of-assistant marker), shifted by one as transformers' causal-LM loss. SFT's objective, PPO's
// ptx term.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "src/model/model_heads.h"
#include "train/training_task.h"

namespace ferry {

class BackboneRunner;

// Summed causal-LM cross-entropy over label tokens; loss_weight of a batch is its label count.
class SftObjective : public TrainingObjective {
 public:
  SftObjective(std::string model_name, CausalLMImpl& model) : name_(std::move(model_name)), model_(model) {}
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

 private:
  std::string name_;
  CausalLMImpl& model_;
};

// The batch's input_ids, attention_mask, position_ids and labels (B, T) with kIgnoreLabel where no
// loss is taken; position t predicts labels[t + 1]. Returns the fp32 sum of -log p(label) over the
// labelled positions, through the runner's (chunked) LM head.
torch::Tensor causal_lm_loss_sum(BackboneRunner& runner, const std::string& model, CausalLMImpl& lm,
                                 const MicroBatch& batch);

// Label tokens that count after the shift: labels[:, 1:] != kIgnoreLabel.
int64_t shifted_label_count(const torch::Tensor& labels);

}  // namespace ferry
