// LoRA for a loaded Llama model (after its weights are loaded): attach adapters to the targeted
// projections of every decoder layer (lora_linear.h), freeze the base weights, read and write the
// adapter tensors, and merge them into the base weights. Names follow PEFT without the adapter
// name, `model.layers.<i>.self_attn.q_proj.lora_A.weight`, so the offload engine's
// group_parameters puts each adapter in its layer's group; PEFT's file format is
// src/io/lora_adapter.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "src/io/safetensors.h"
#include "src/model/decoder_model.h"

namespace ferry {

// The projections LoRA can target, in layer order.
const std::vector<std::string>& lora_target_names();

// Throws ConfigError naming lora.<key>: rank < 1, alpha <= 0, dropout outside [0, 1), no target or
// an unknown one. (lora.export is not used here.)
void check_lora_settings(const LoraConfig& settings);

// Attaches an adapter to each targeted projection of every layer, in the base weight's dtype and
// device: lora_A ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT's kaiming_uniform_(a=sqrt(5))) drawn on the CPU
// from `seed` (layer by layer, in the order of its projections()), lora_B = 0. Throws UserError when the
// model already has adapters.
// Returns what carries adapters: on a Mixture of Experts, lora.target_modules names expert
// projections by their name (gate_proj, up_proj, down_proj; Mixtral's w1, w3, w2: every expert's,
// and the shared expert's and dense layers' of that name, as PEFT matches names), all of them as
// `experts`, and the router as `gate`.
struct LoraCoverage {
  int64_t adapted = 0;          // projections with an adapter
  int64_t adapted_experts = 0;  // of them, experts' projections
  int64_t expert_matrices = 0;  // experts' projections in the model
};
LoraCoverage apply_lora(DecoderModelImpl& model, const LoraConfig& settings, uint64_t seed);

// requires_grad(false) on every parameter of `model` that is not a lora_A/lora_B weight.
void freeze_base_weights(torch::nn::Module& model);

// True when any projection carries an adapter.
bool has_lora(const DecoderModelImpl& model);

// Switches every attached adapter on or off; off, the model computes its base weights' function
// (DPO's reference without a second copy of the weights). Returns whether any adapter is attached.
bool set_lora_enabled(DecoderModelImpl& model, bool enabled);

// Adapters off for the guard's lifetime (and back on after it, also when an exception leaves).
class LoraDisabled {
 public:
  explicit LoraDisabled(DecoderModelImpl& model) : model_(model) { set_lora_enabled(model_, false); }
  ~LoraDisabled() { set_lora_enabled(model_, true); }
  LoraDisabled(const LoraDisabled&) = delete;
  LoraDisabled& operator=(const LoraDisabled&) = delete;

 private:
  DecoderModelImpl& model_;
};

// The adapter tensors by parameter name (detached, sharing storage): with `model.` in front when
// given the causal LM, as in its checkpoint.
io::TensorMap lora_state(const torch::nn::Module& model);

// Copies adapter tensors (by the names lora_state gives) into the model's adapters. Checks all
// names and shapes first; InputError naming `source` lists what is missing, unexpected or misshaped.
void load_lora_state(torch::nn::Module& model, const io::TensorMap& tensors, const std::string& source);

// Folds every adapter into its base weight (W += scaling * B @ A, in fp32) and removes the adapters;
// the model computes the same function as before, with plain projections.
void merge_lora(DecoderModelImpl& model);

}  // namespace ferry
