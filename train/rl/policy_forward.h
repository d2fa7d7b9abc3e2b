// The policy's training-mode forward over a micro-batch of responses, as PPO's and GRPO's learners
// take it: per-token log-probs of the sampled tokens (with gradients) and the entropy (in the graph
// only when it is part of the loss), both (b, R) on the model's device, 0 outside the response mask.
#pragma once

#include <torch/types.h>

#include <string>

#include "train/rl/experience.h"

namespace ferry {
class BackboneRunner;
}  // namespace ferry

namespace ferry::rl {

struct PolicyForward {
  torch::Tensor logprobs;  // (b, R)
  torch::Tensor entropy;   // (b, R)
  torch::Tensor mask;      // (b, R) the response mask on the model's device
};

PolicyForward policy_forward(BackboneRunner& runner, const std::string& name, LlamaForCausalLMImpl& policy,
                             const Experience& part, double temperature, bool entropy_grad);

}  // namespace ferry::rl
