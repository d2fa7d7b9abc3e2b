// Group-by-group forward with engine hooks and optional per-layer activation checkpointing.
#include "src/train/backbone_runner.h"

#include "src/train/activation_checkpoint.h"

namespace ferry {
namespace {

torch::Tensor to_device(const torch::Tensor& t, const c10::Device& device) {
  return t.defined() ? t.to(device) : t;
}

}  // namespace

torch::Tensor BackboneRunner::layers(const std::string& model, LlamaModelImpl& backbone, const torch::Tensor& input_ids,
                                     const torch::Tensor& attention_mask, const torch::Tensor& position_ids) {
  const torch::Tensor& weight = backbone.embed_tokens->weight;
  const c10::Device device = weight.device();
  const torch::Tensor ids = input_ids.to(device, torch::kLong);
  const LayerInputs inputs = backbone.layer_inputs(ids, to_device(attention_mask, device),
                                                   to_device(position_ids, device), nullptr, weight.scalar_type());
  GroupRef group{&model, 0};
  engine_.before_group(group, GroupPass::forward);
  torch::Tensor h = backbone.embed_tokens(ids);  // (B, T, C)
  engine_.after_group(group, GroupPass::forward);
  for (int64_t i = 0; i < backbone.num_layers(); ++i) {
    group.index = 1 + i;
    LlamaDecoderLayerImpl& layer = *backbone.decoder_layers[static_cast<size_t>(i)];
    engine_.before_group(group, GroupPass::forward);
    if (checkpointing_) {
      h = checkpointed_layer(layer, h, inputs, [this, group] { engine_.before_group(group, GroupPass::backward); },
                             [this, group] { engine_.after_group(group, GroupPass::backward); });
    } else {
      h = layer.forward(h, inputs.cos, inputs.sin, inputs.mask);
    }
    engine_.after_group(group, GroupPass::forward);
  }
  return h;
}

torch::Tensor BackboneRunner::causal_lm(const std::string& model, LlamaForCausalLMImpl& lm, const torch::Tensor& input_ids,
                                        const torch::Tensor& attention_mask, const torch::Tensor& position_ids) {
  torch::Tensor h = layers(model, *lm.model, input_ids, attention_mask, position_ids);
  const GroupRef head{&model, lm.model->num_layers() + 1};
  engine_.before_group(head, GroupPass::forward);
  torch::Tensor logits = lm.logits(lm.model->norm(h));  // (B, T, V)
  engine_.after_group(head, GroupPass::forward);
  return logits;
}

torch::Tensor BackboneRunner::score(const std::string& model, LlamaForScoreImpl& scorer, const torch::Tensor& input_ids,
                                    const torch::Tensor& attention_mask, const torch::Tensor& position_ids) {
  torch::Tensor h = layers(model, *scorer.model, input_ids, attention_mask, position_ids);
  const GroupRef head{&model, scorer.model->num_layers() + 1};
  engine_.before_group(head, GroupPass::forward);
  torch::Tensor values = scorer.score(scorer.model->norm(h)).squeeze(-1);  // (B, T)
  engine_.after_group(head, GroupPass::forward);
  return values;
}

}  // namespace ferry
