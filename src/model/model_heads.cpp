// Language-model and scalar heads on the decoder backbone.
#include "src/model/model_heads.h"

#include "core/error.h"
#include "kernels/ops/chunked_lm_head.h"
#include "kernels/ops/small_batch_linear.h"

namespace ferry {

CausalLMImpl::CausalLMImpl(const ModelShape& config, const LayerBuiltHook& on_layer_built) {
  model = register_module("model", DecoderModel(config, on_layer_built));
  if (!config.tie_word_embeddings) {
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  }
}

torch::Tensor CausalLMImpl::logits(const torch::Tensor& hidden) {
  return kernels::soft_cap(kernels::small_batch_linear(hidden, lm_head ? lm_head->weight : model->embed_tokens->weight),
                          model->config().final_logit_softcapping);
}

torch::Tensor CausalLMImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                            const torch::Tensor& position_ids, KvCache* cache) {
  return logits(model(input_ids, attention_mask, position_ids, cache));  // (B, T, V)
}

ScoreModelImpl::ScoreModelImpl(const ModelShape& config, const LayerBuiltHook& on_layer_built) {
  model = register_module("model", DecoderModel(config, on_layer_built));
  score = register_module("score", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, 1).bias(false)));
}

torch::Tensor ScoreModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                         const torch::Tensor& position_ids, KvCache* cache) {
  return score(model(input_ids, attention_mask, position_ids, cache)).squeeze(-1);  // (B, T)
}

torch::Tensor last_token_values(const torch::Tensor& values, const torch::Tensor& attention_mask) {
  if (values.dim() != 2 || !attention_mask.defined() || attention_mask.sizes() != values.sizes()) {
    throw InputError("last_token_values: values and attention_mask must both be (B, T)");
  }
  const torch::Tensor mask = attention_mask.to(values.device(), torch::kLong);
  if (!(mask.sum(1) > 0).all().item<bool>()) {
    throw InputError("last_token_values: a row of attention_mask has no tokens (all padding)");
  }
  // Position of the last 1 in each row: argmax of mask * (1 .. T) picks the largest such index.
  const torch::Tensor index = (mask * torch::arange(1, mask.size(1) + 1, mask.options())).argmax(1);  // (B)
  return values.gather(1, index.unsqueeze(1)).squeeze(1);
}

}  // namespace ferry
