// Models built on the decoder backbone, named as in Hugging Face checkpoints:
//   CausalLM    `model.*` + `lm_head.weight` (absent when tie_word_embeddings): logits (soft-capped
//               where the family says so: Gemma 2's final_logit_softcapping). Hugging Face's
//               <Family>ForCausalLM.
//   ScoreModel  `model.*` + `score.weight` (Hugging Face's <Family>ForSequenceClassification with
//               one label): one scalar per token, for reward models and PPO critics.
#pragma once

#include <torch/torch.h>

#include "core/config/model_shape.h"
#include "src/model/decoder_model.h"

namespace ferry {

class KvCache;

class CausalLMImpl : public torch::nn::Module {
 public:
  explicit CausalLMImpl(const ModelShape& config, const LayerBuiltHook& on_layer_built = {});

  // Arguments as DecoderModel::forward. Returns logits (B, T, V) in the model dtype.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                        const torch::Tensor& position_ids = {}, KvCache* cache = nullptr);

  // hidden: (..., C) -> logits (..., V). Lets callers project only the positions they need.
  // Soft-capped when config().final_logit_softcapping > 0.
  torch::Tensor logits(const torch::Tensor& hidden);

  const ModelShape& config() const { return model->config(); }
  bool tied() const { return !lm_head; }
  // The LM head's weight (V, C): lm_head's, or the embedding matrix when tied.
  const torch::Tensor& head_weight() const { return lm_head ? lm_head->weight : model->embed_tokens->weight; }

  DecoderModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when the embedding matrix doubles as the head
};
TORCH_MODULE(CausalLM);

class ScoreModelImpl : public torch::nn::Module {
 public:
  explicit ScoreModelImpl(const ModelShape& config, const LayerBuiltHook& on_layer_built = {});

  // Arguments as DecoderModel::forward. Returns one value per token: (B, T), in the model dtype.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                        const torch::Tensor& position_ids = {}, KvCache* cache = nullptr);

  const ModelShape& config() const { return model->config(); }

  DecoderModel model{nullptr};
  torch::nn::Linear score{nullptr};  // Linear(C, 1), no bias (as Hugging Face)
};
TORCH_MODULE(ScoreModel);

// values: (B, T), attention_mask: (B, T) 1/0 -> (B): the value at each row's last token
// (left or right padding). A row without any token is an InputError.
torch::Tensor last_token_values(const torch::Tensor& values, const torch::Tensor& attention_mask);

}  // namespace ferry
