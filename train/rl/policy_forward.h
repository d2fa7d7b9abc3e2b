// The policy's training-mode forward over a micro-batch of responses, as PPO's and GRPO's learners
// take it: per-token log-probs of the sampled tokens (with gradients) and the entropy (in the graph
// only when it is part of the loss), both (b, R) on the model's device, 0 outside the response mask.
#pragma once

#include <torch/types.h>

#include <string>

#include "kernels/ops/chunked_lm_head.h"
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

// share_prompts (train.share_prompts): rows of one prompt share its forward (shared_prompt_pack.h).
PolicyForward policy_forward(BackboneRunner& runner, const std::string& name, CausalLMImpl& policy,
                             const Experience& part, double temperature, bool entropy_grad, bool share_prompts);

// The log-probs of each row's response tokens (columns P ..) under `lm` at `temperature`, and the
// entropy there when with_entropy: (B, R) fp32 each, not masked. With share_prompts, rows with the
// same prompt go through one packed forward (shared_prompt_pack.h) when that runs fewer tokens and
// the model has no sliding window shorter than the packed sequence; else one row each.
kernels::LmHeadTokens response_token_logprobs(BackboneRunner& runner, const std::string& name,
                                              CausalLMImpl& lm, const torch::Tensor& sequences,
                                              const torch::Tensor& attention_mask, int64_t prompt_length,
                                              double temperature, bool with_entropy, bool share_prompts);

}  // namespace ferry::rl
