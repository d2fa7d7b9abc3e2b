// Models built on the Llama backbone, named as in Hugging Face checkpoints:
//   LlamaForCausalLM  `model.*` + `lm_head.weight` (absent when tie_word_embeddings): logits.
//   LlamaForScore     `model.*` + `score.weight` (HF LlamaForSequenceClassification with one
//                     label): one scalar per token, for reward models and PPO critics.
#pragma once

#include <torch/torch.h>

#include "core/config/llama_config.h"
#include "src/model/llama_model.h"

namespace ferry {

class KvCache;

class LlamaForCausalLMImpl : public torch::nn::Module {
 public:
  explicit LlamaForCausalLMImpl(const LlamaConfig& config, const LayerBuiltHook& on_layer_built = {});

  // Arguments as LlamaModel::forward. Returns logits (B, T, V) in the model dtype.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                        const torch::Tensor& position_ids = {}, KvCache* cache = nullptr);

  // hidden: (..., C) -> logits (..., V). Lets callers project only the positions they need.
  torch::Tensor logits(const torch::Tensor& hidden);

  const LlamaConfig& config() const { return model->config(); }
  bool tied() const { return !lm_head; }
  // The LM head's weight (V, C): lm_head's, or the embedding matrix when tied.
  const torch::Tensor& head_weight() const { return lm_head ? lm_head->weight : model->embed_tokens->weight; }

  LlamaModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when the embedding matrix doubles as the head
};
TORCH_MODULE(LlamaForCausalLM);

class LlamaForScoreImpl : public torch::nn::Module {
 public:
  explicit LlamaForScoreImpl(const LlamaConfig& config, const LayerBuiltHook& on_layer_built = {});

  // Arguments as LlamaModel::forward. Returns one value per token: (B, T), in the model dtype.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                        const torch::Tensor& position_ids = {}, KvCache* cache = nullptr);

  const LlamaConfig& config() const { return model->config(); }

  LlamaModel model{nullptr};
  torch::nn::Linear score{nullptr};  // Linear(C, 1), no bias (as Hugging Face)
};
TORCH_MODULE(LlamaForScore);

// values: (B, T), attention_mask: (B, T) 1/0 -> (B): the value at each row's last token
// (left or right padding). A row without any token is an InputError.
torch::Tensor last_token_values(const torch::Tensor& values, const torch::Tensor& attention_mask);

}  // namespace ferry
