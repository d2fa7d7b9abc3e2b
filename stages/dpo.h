// Direct preference optimisation and its family (`ferry train-dpo`): a causal LM learns from
// preference pairs without a reward model. Losses (dpo.loss_type, train/preference/preference_losses.h):
// sigmoid (DPO, label_smoothing: conservative DPO), robust, hinge, ipo, and the reference-free
// simpo and orpo — as TRL defines them, averaged over the pairs of an optimizer step.
//
// The reference model (dpo.reference) costs no second copy of the weights where it can:
//   lora_off    the policy itself with its LoRA adapters switched off (auto's choice with LoRA,
//               unless dpo.reference_model names another folder: then `model`)
//   precompute  the reference log-probs of every pair computed once before training and cached in
//               output.dir/reference_logps.safetensors (auto's choice without LoRA; reused on
//               resume when its fingerprint — pairs, reference folder — matches)
//   model       a frozen second model (dpo.reference_model or model.path) in the engine
// simpo and orpo use no reference. final/ is a causal LM as train-sft writes it.
#pragma once

#include <optional>
#include <string>

#include "core/config/config.h"
#include "src/model/llama_heads.h"
#include "train/training_task.h"

namespace ferry {

// The reference a run uses, resolved from dpo.reference, dpo.loss_type and LoRA.
enum class ReferenceSource { none, precomputed, model, lora_off };
ReferenceSource resolve_reference(const Config& config);

// Summed pair losses of the DPO family; extra values as TRL logs them (rewards/chosen, ...).
class DpoObjective : public TrainingObjective {
 public:
  // `reference`: the frozen model (ReferenceSource::model) and its engine name; unused otherwise.
  DpoObjective(const DpoConfig& settings, ReferenceSource source, std::string policy_name, LlamaForCausalLMImpl& policy,
               std::string reference_name = {}, LlamaForCausalLMImpl* reference = nullptr);
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

 private:
  DpoConfig settings_;
  ReferenceSource source_;
  std::string policy_name_, reference_name_;
  LlamaForCausalLMImpl& policy_;
  LlamaForCausalLMImpl* reference_;
};

// Summed log-probs of each row's labelled tokens (2B) under `model` without gradients, with its
// LoRA adapters off when `adapters_off` (the reference of every mode but precompute's cache).
torch::Tensor reference_logps(const MicroBatch& batch, const std::string& model_name, LlamaForCausalLMImpl& model,
                              bool adapters_off, BackboneRunner& runner);

void run_dpo(const Config& config);

}  // namespace ferry
