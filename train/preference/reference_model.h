// The reference model of the preference stages (train-dpo, train-kto): which source a run takes its
// reference log-probs from, the summed label log-probs a model gives a batch's rows, and the
// `precompute` source, which computes every row's reference log-probs once before training and
// caches them (reference_logps_cache.h).
//
//   lora_off    the policy itself with its LoRA adapters switched off (auto's choice with LoRA,
//               unless a reference folder is named: then `model`)
//   precompute  computed once before training, while the policy still holds its starting weights,
//               and cached in output.dir/reference_logps.safetensors (auto's choice without LoRA)
//   model       a frozen second model in the engine
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "src/data/preference_dataset.h"
#include "src/model/model_heads.h"
#include "train/preference_losses.h"
#include "train/training_task.h"

namespace ferry {

namespace offload {
class ParameterEngine;
}

enum class ReferenceSource { none, precomputed, model, lora_off };

// Resolves `<section>.reference` (mode) for a run with or without LoRA; `reference_model` is
// `<section>.reference_model`. Throws ConfigError for a mode the run cannot use.
ReferenceSource resolve_reference_source(DpoReference mode, const std::string& reference_model, bool needs_reference,
                                         bool lora, const std::string& section);

// The folder `model` loads the reference from (<section>.reference_model, else model.path), checked
// to exist for a run that needs it; empty for the other sources.
std::filesystem::path reference_folder(ReferenceSource source, const Config& config, const std::string& reference_model,
                                       const std::string& section);
// A frozen copy of the model in `folder`, added to `engine` as `name` (not trainable).
CausalLM load_frozen_reference(const std::filesystem::path& folder, offload::ParameterEngine& engine,
                                       const std::string& name, at::ScalarType dtype, c10::Device device);
// A preference run's engine (train/run_engine.h) holding the policy, trainable, as "policy" and,
// for the `model` source, the frozen reference from `folder` as "reference" (else null).
struct PreferenceEngine {
  std::unique_ptr<offload::ParameterEngine> engine;
  CausalLM frozen{nullptr};
};
PreferenceEngine make_preference_engine(Config& config, const ModelShape& shape, c10::Device device,
                                        CausalLMImpl& policy, ReferenceSource source,
                                        const std::filesystem::path& folder, at::ScalarType dtype);

// For the run log: "the policy with its LoRA adapters off", ...
std::string describe_reference(ReferenceSource source, const std::filesystem::path& folder);

// The label log-probs of every row of a pair batch (2B), LD-DPO-weighted when ld_alpha < 1 (the
// plain sums kept in plain_sum); with every_token_rows b > 0 also, from the same forward, those of
// the first b rows (the chosen answers) over every real token, prompt included (ORPO's NLL).
struct BatchLogps {
  SequenceLogps labels, every_token;
};
BatchLogps batch_logps(BackboneRunner& runner, const std::string& name, CausalLMImpl& model,
                       const MicroBatch& batch, int64_t every_token_rows, double ld_alpha = 1.0);

// Summed log-probs of each row's labelled tokens (2B) under `model` without gradients, with its
// LoRA adapters off when `adapters_off` (the reference of every mode but precompute's cache).
torch::Tensor reference_logps(const MicroBatch& batch, const std::string& model_name, CausalLMImpl& model,
                              bool adapters_off, BackboneRunner& runner, double ld_alpha = 1.0);

// The policy of a preference objective and where its reference log-probs come from.
class PolicyAndReference {
 public:
  // `reference`: the frozen model (ReferenceSource::model) and its engine name; unused otherwise.
  PolicyAndReference(ReferenceSource source, std::string policy_name, CausalLMImpl& policy,
                     std::string reference_name, CausalLMImpl* reference);

  // The reference's summed label log-probs of every row of `rows` (no gradients): the batch's
  // precomputed "reference_logps", or a forward of the frozen model or of the policy with its
  // adapters off (LD-DPO-weighted when ld_alpha < 1).
  torch::Tensor reference_logps(const MicroBatch& rows, BackboneRunner& runner, double ld_alpha = 1.0) const;

  const std::string& policy_name() const { return policy_name_; }
  CausalLMImpl& policy() const { return policy_; }

 private:
  ReferenceSource source_;
  std::string policy_name_, reference_name_;
  CausalLMImpl& policy_;
  CausalLMImpl* reference_;
};

// The `precompute` source: fills the reference log-probs of every pair of `train` and `eval` from
// the cache in output.dir or computes them now — before the trainer resumes anything, while the
// live policy still holds model.path's weights. A separate `reference_model` folder is loaded into
// the policy for the computation and model.path's weights put back after. `identity_extra` joins
// the cache's fingerprint (settings that change the values, e.g. LD-DPO's alpha).
void precompute_reference(const Config& config, const std::string& reference_model, const std::string& identity_extra,
                          offload::ParameterEngine& engine, const std::string& name, CausalLMImpl& model,
                          std::vector<PreferencePair>& train, std::vector<PreferencePair>& eval, int64_t pad_id,
                          double ld_alpha, const std::string& unit = "pairs");

}  // namespace ferry
