// The learners' policy forward (see policy_forward.h).
#include "train/rl/policy_forward.h"

#include <torch/torch.h>

#include "src/model/attention_mask.h"
#include "train/backbone_runner.h"

namespace ferry::rl {

PolicyForward policy_forward(BackboneRunner& runner, const std::string& name, LlamaForCausalLMImpl& policy,
                             const Experience& part, double temperature, bool entropy_grad) {
  const int64_t prompt_length = part.prompt_length;
  const torch::Tensor positions = position_ids_from_attention_mask(part.attention_mask);
  const torch::Tensor ids = part.sequences.narrow(1, prompt_length, part.response_length());  // (b, R)
  // One pass of the (chunked) LM head gives the sampled tokens' log-probs and the entropy.
  const kernels::LmHeadTokens t = runner.token_logprobs(name, policy, part.sequences, part.attention_mask, positions,
                                                        ids, prompt_length - 1, temperature, true);
  PolicyForward out;
  out.mask = part.response_mask.to(t.logprobs.device());
  out.logprobs = t.logprobs * out.mask;
  out.entropy = (entropy_grad ? t.entropy : t.entropy.detach()) * out.mask;
  return out;
}

}  // namespace ferry::rl
