// Kahneman-Tversky optimisation (`ferry train-kto`): a causal LM learns from unpaired examples — a
// prompt with one completion labelled desirable or undesirable (src/data/unpaired_dataset.h;
// preference pairs are split into two) — as TRL 1.16's KTOTrainer does: the loss of
// train/preference/kto_loss.h, with the KL term estimated from each micro-batch's mismatched rows
// (train/preference/kto_batches.h). The reference (kto.reference) is found as DPO's is
// (train/preference/reference_model.h). final/ is a causal LM as train-sft writes it.
#pragma once

#include <string>

#include "core/config/config.h"
#include "src/model/model_heads.h"
#include "train/preference/reference_model.h"
#include "train/training_task.h"

namespace ferry {

// Summed example losses of a KTO micro-batch (rows 0..B-1 the examples, B..2B-1 their KL rows);
// extra values as TRL logs them (kl, rewards/chosen, ...).
class KtoObjective : public TrainingObjective {
 public:
  // `reference`: the frozen model (ReferenceSource::model) and its engine name; unused otherwise.
  KtoObjective(const KtoConfig& settings, ReferenceSource source, std::string policy_name, CausalLMImpl& policy,
               std::string reference_name = {}, CausalLMImpl* reference = nullptr);
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

 private:
  KtoConfig settings_;
  PolicyAndReference models_;
};

void run_kto(const Config& config);

}  // namespace ferry
