// Reward-model training (`ferry train-rm`): a Llama backbone with a scalar score head, read at each
// sequence's last token, learns to score the chosen response of a preference pair above the
// rejected one. Loss per pair: -log σ(r_c − r_r − margin) + rm.center_rewards_coefficient ·
// (r_c + r_r)² (TRL's RewardTrainer), averaged over the pairs of an optimizer step. Starts from an
// SFT folder or any Hugging Face causal LM (score head drawn from train.seed), or continues a
// reward model; final/ is a LlamaForSequenceClassification folder. With LoRA the adapters and the
// score head train, and final/ is merged.
#pragma once

#include <string>

#include "core/config/config.h"
#include "src/model/model_heads.h"
#include "train/training_task.h"

namespace ferry {

// Summed pair losses; extra values: accuracy, rewards/chosen, rewards/rejected, rewards/gap.
class RewardObjective : public TrainingObjective {
 public:
  RewardObjective(std::string model_name, ScoreModelImpl& model, double center_rewards_coefficient)
      : name_(std::move(model_name)), model_(model), center_(center_rewards_coefficient) {}
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

 private:
  std::string name_;
  ScoreModelImpl& model_;
  double center_;
};

// The score of each row at its last token: (2B) fp32 for a preference micro-batch.
torch::Tensor sequence_rewards(const MicroBatch& batch, const std::string& model_name, ScoreModelImpl& model,
                               BackboneRunner& runner);

void run_rm(const Config& config);

}  // namespace ferry
