// The learners' policy forward (see policy_forward.h).
#include "train/rl/policy_forward.h"

#include <torch/torch.h>

#include "src/model/attention_mask.h"
#include "src/model/model_heads.h"
#include "train/backbone_runner.h"
#include "train/rl/shared_prompt_pack.h"

namespace ferry::rl {

kernels::LmHeadTokens response_token_logprobs(BackboneRunner& runner, const std::string& name,
                                              CausalLMImpl& lm, const torch::Tensor& sequences,
                                              const torch::Tensor& attention_mask, int64_t prompt_length,
                                              double temperature, bool with_entropy, bool share_prompts) {
  if (share_prompts) {
    const std::optional<SharedPromptPack> pack = pack_shared_prompts(sequences, attention_mask, prompt_length);
    const int64_t window = lm.model->config().sliding_window;
    if (pack && pack->packed_tokens() < sequences.numel() && (!lm.model->config().any_layer_slides() || pack->input_ids.size(1) <= window)) {
      // One pass of the (chunked) LM head over the packed response columns.
      const kernels::LmHeadTokens t = runner.token_logprobs(name, lm, pack->input_ids, pack->attention,
                                                            pack->position_ids, pack->targets, pack->first_column,
                                                            temperature, with_entropy);
      return {pack->unpack(t.logprobs), pack->unpack(t.entropy)};
    }
  }
  const torch::Tensor ids = sequences.narrow(1, prompt_length, sequences.size(1) - prompt_length);  // (B, R)
  return runner.token_logprobs(name, lm, sequences, attention_mask, position_ids_from_attention_mask(attention_mask),
                               ids, prompt_length - 1, temperature, with_entropy);
}

PolicyForward policy_forward(BackboneRunner& runner, const std::string& name, CausalLMImpl& policy,
                             const Experience& part, double temperature, bool entropy_grad, bool share_prompts) {
  const kernels::LmHeadTokens t = response_token_logprobs(runner, name, policy, part.sequences, part.attention_mask,
                                                          part.prompt_length, temperature, true, share_prompts);
  PolicyForward out;
  out.mask = part.response_mask.to(t.logprobs.device());
  out.logprobs = t.logprobs * out.mask;
  out.entropy = (entropy_grad ? t.entropy : t.entropy.detach()) * out.mask;
  return out;
}

}  // namespace ferry::rl
