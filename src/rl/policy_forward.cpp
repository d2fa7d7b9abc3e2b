// The learners' policy forward (see policy_forward.h).
#include "src/rl/policy_forward.h"

#include <torch/torch.h>

#include "src/model/attention_mask.h"
#include "src/train/backbone_runner.h"

namespace ferry {

PolicyForward policy_forward(BackboneRunner& runner, const std::string& name, LlamaForCausalLMImpl& policy,
                             const Experience& part, double temperature, bool entropy_grad) {
  const int64_t prompt_length = part.prompt_length;
  const torch::Tensor positions = position_ids_from_attention_mask(part.attention_mask);
  const torch::Tensor logits = runner.causal_lm(name, policy, part.sequences, part.attention_mask, positions,
                                                prompt_length - 1, part.response_length());  // (b, R, V)
  PolicyForward out;
  out.mask = part.response_mask.to(logits.device());
  // One log-softmax gives the sampled tokens' log-probs and the entropy.
  const torch::Tensor log_p = torch::log_softmax(logits.to(torch::kFloat) / temperature, -1);
  const torch::Tensor ids = part.sequences.narrow(1, prompt_length, part.response_length()).to(logits.device());
  out.logprobs = log_p.gather(-1, ids.unsqueeze(-1)).squeeze(-1) * out.mask;
  const torch::Tensor lp = entropy_grad ? log_p : log_p.detach();
  out.entropy = -(lp.exp() * lp).sum(-1) * out.mask;
  return out;
}

}  // namespace ferry
