// Direct preference optimisation and its family (`ferry train-dpo`): a causal LM learns from
// preference pairs without a reward model. Losses (dpo.loss_type, train/preference_losses.h):
// the DPO family of TRL 1.16 (sigmoid, ipo, hinge, ..., combined with weights as MPO, with LD-DPO's
// length weighting and f-DPO's divergences) and the reference-free simpo and orpo — as TRL defines
// them, averaged over the pairs of an optimizer step.
//
// The reference model (dpo.reference) costs no second copy of the weights where it can:
//   lora_off    the policy itself with its LoRA adapters switched off (auto's choice with LoRA,
//               unless dpo.reference_model names another folder: then `model`)
//   precompute  the reference log-probs of every pair computed once before training and cached in
//               output.dir/reference_logps.safetensors (auto's choice without LoRA; reused on
//               resume when its fingerprint — pairs, reference folder — matches)
//   model       a frozen second model (dpo.reference_model or model.path) in the engine
// simpo and orpo use no reference. final/ is a causal LM as train-sft writes it. With dpo.online
// the run is online DPO instead (stages/online_dpo.h): pairs sampled from the policy as it learns.
#pragma once

#include <optional>
#include <string>

#include "core/config/config.h"
#include "src/model/model_heads.h"
#include "train/preference/reference_model.h"
#include "train/training_task.h"

namespace ferry {

// The reference a run uses, resolved from dpo.reference, dpo.loss_type and LoRA.
ReferenceSource resolve_reference(const Config& config);

// Summed pair losses of the DPO family; extra values as TRL logs them (rewards/chosen, ...).
class DpoObjective : public TrainingObjective {
 public:
  // `reference`: the frozen model (ReferenceSource::model) and its engine name; unused otherwise.
  DpoObjective(const DpoConfig& settings, ReferenceSource source, std::string policy_name, CausalLMImpl& policy,
               std::string reference_name = {}, CausalLMImpl* reference = nullptr);
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

 private:
  DpoConfig settings_;
  PolicyAndReference models_;
};

void run_dpo(const Config& config);

}  // namespace ferry
