// Group-by-group forward with engine hooks and optional per-layer activation checkpointing.
#include "train/backbone_runner.h"

#include <memory>

#include "core/error.h"

#include "train/activation_checkpoint.h"

namespace ferry {
namespace {

torch::Tensor to_device(const torch::Tensor& t, const c10::Device& device) {
  return t.defined() ? t.to(device) : t;
}

}  // namespace

bool BackboneRunner::recomputes(const offload::GroupRef& group, bool decoder_layer) const {
  if (!torch::GradMode::is_enabled()) return false;
  return (decoder_layer && checkpointing_) || engine_.needs_recompute(group);
}

torch::Tensor BackboneRunner::run_group(const offload::GroupRef& group, bool decoder_layer,
                                        const std::function<torch::Tensor(const torch::Tensor&)>& fn,
                                        const torch::Tensor& input) {
  engine_.before_group(group, offload::GroupPass::forward);
  torch::Tensor out;
  if (recomputes(group, decoder_layer)) {
    // Backward runs after this call returns: the hooks own a copy of the model's name.
    auto name = std::make_shared<const std::string>(*group.model);
    const int64_t index = group.index;
    out = checkpointed(fn, input, [this, name, index] { engine_.before_group({name.get(), index}, offload::GroupPass::backward); },
                       [this, name, index] { engine_.after_group({name.get(), index}, offload::GroupPass::backward); },
                       decoder_layer ? engine_.activation_offloader() : nullptr);
  } else {
    out = fn(input);
  }
  engine_.after_group(group, offload::GroupPass::forward);
  return out;
}

torch::Tensor BackboneRunner::layers(const std::string& model, DecoderModelImpl& backbone, const torch::Tensor& input_ids,
                                     const torch::Tensor& attention_mask, const torch::Tensor& position_ids) {
  const torch::Tensor& weight = backbone.embed_tokens->weight;
  const c10::Device device = weight.device();
  const torch::Tensor ids = input_ids.to(device, torch::kLong);
  const LayerInputs inputs = backbone.layer_inputs(ids, to_device(attention_mask, device),
                                                   to_device(position_ids, device), nullptr, weight.scalar_type());
  // The embedding's input is token ids; a recomputed embedding hangs off an empty float anchor.
  const torch::Tensor anchor = torch::empty({0}, weight.options().dtype(torch::kFloat).requires_grad(false));
  DecoderModelImpl* embed = &backbone;
  torch::Tensor h = run_group({&model, 0}, false, [embed, ids](const torch::Tensor&) { return embed->embed(ids); }, anchor);
  // A Mixture of Experts records its routing into a RouterLoad per forward with gradients; each
  // layer's function sets it, so a layer recomputed in backward records into its own forward's.
  std::shared_ptr<RouterLoad> load;
  const ModelShape& config = backbone.config();
  if (config.has_experts() && torch::GradMode::is_enabled()) {
    const bool rows_mask = attention_mask.defined() && attention_mask.dim() == 2;
    load = std::make_shared<RouterLoad>(config.moe.num_experts, config.moe.experts_per_token,
                                        config.moe.router_aux_loss ? config.moe.router_aux_loss_coef : 0.0,
                                        rows_mask ? attention_mask : torch::Tensor());
    pending_loads_.push_back(load);
  }
  for (int64_t i = 0; i < backbone.num_layers(); ++i) {
    DecoderLayerImpl* layer = backbone.decoder_layers[static_cast<size_t>(i)].get();
    h = run_group({&model, 1 + i}, true,
                  [layer, inputs, load](const torch::Tensor& x) {
                    if (!layer->moe) return layer->forward(x, inputs);
                    // Set for this forward only: a generation between steps must not record into it.
                    layer->moe->set_router_load(load);
                    torch::Tensor out = layer->forward(x, inputs);
                    layer->moe->set_router_load(nullptr);
                    return out;
                  },
                  h);  // (B, T, C)
  }
  return h;
}

torch::Tensor BackboneRunner::causal_lm(const std::string& model, CausalLMImpl& lm, const torch::Tensor& input_ids,
                                        const torch::Tensor& attention_mask, const torch::Tensor& position_ids,
                                        int64_t first_column, int64_t columns) {
  torch::Tensor h = layers(model, *lm.model, input_ids, attention_mask, position_ids);
  if (first_column > 0 || columns >= 0) {
    h = h.narrow(1, first_column, columns >= 0 ? columns : h.size(1) - first_column);
  }
  CausalLMImpl* head = &lm;
  return run_group({&model, lm.model->num_layers() + 1}, false,
                   [head](const torch::Tensor& x) { return head->logits(head->model->norm(x)); }, h);  // (B, T, V)
}

torch::Tensor BackboneRunner::causal_lm_head(const std::string& model, CausalLMImpl& lm,
                                             const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                             const torch::Tensor& position_ids, int64_t first_column, int64_t columns,
                                             const LmHeadFn& head) {
  const torch::Tensor h = layers(model, *lm.model, input_ids, attention_mask, position_ids).narrow(1, first_column, columns);
  CausalLMImpl* lm_ptr = &lm;
  return run_group({&model, lm.model->num_layers() + 1}, false,
                   [lm_ptr, head](const torch::Tensor& x) {
                     return head(lm_ptr->model->norm(x), lm_ptr->head_weight(), lm_ptr->config().final_logit_softcapping);
                   },
                   h);
}

kernels::LmHeadTokens BackboneRunner::token_logprobs(const std::string& model, CausalLMImpl& lm,
                                                     const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                     const torch::Tensor& position_ids, const torch::Tensor& targets,
                                                     int64_t first_column, double temperature, bool with_entropy) {
  const int64_t rows = targets.size(0), columns = targets.size(1);
  const torch::Tensor flat = targets.reshape({-1}).to(lm.head_weight().device(), torch::kLong);
  const torch::Tensor both = causal_lm_head(
      model, lm, input_ids, attention_mask, position_ids, first_column, columns,
      [chunk = logits_chunk_, flat, temperature, with_entropy](const torch::Tensor& hidden, const torch::Tensor& weight,
                                                               double softcap) {
        const kernels::LmHeadTokens t = kernels::lm_head_tokens(hidden.reshape({-1, hidden.size(-1)}), weight, flat,
                                                                temperature, chunk, with_entropy, softcap);
        return torch::stack({t.logprobs, t.entropy});  // (2, N)
      });
  return {both[0].view({rows, columns}), both[1].view({rows, columns})};
}

torch::Tensor BackboneRunner::score(const std::string& model, ScoreModelImpl& scorer, const torch::Tensor& input_ids,
                                    const torch::Tensor& attention_mask, const torch::Tensor& position_ids) {
  torch::Tensor h = layers(model, *scorer.model, input_ids, attention_mask, position_ids);
  ScoreModelImpl* head = &scorer;
  return run_group({&model, scorer.model->num_layers() + 1}, false,
                   [head](const torch::Tensor& x) { return head->score(head->model->norm(x)).squeeze(-1); }, h);  // (B, T)
}

torch::Tensor BackboneRunner::add_router_loss(const torch::Tensor& loss, double share) {
  taken_loads_ = std::move(pending_loads_);
  pending_loads_.clear();
  torch::Tensor total = loss;
  for (const auto& load : taken_loads_) {
    if (load->coef() > 0) total = total + load->loss_term(loss.device()) * share;
  }
  return total;
}

MetricValues BackboneRunner::router_metrics(double weight) const {
  if (taken_loads_.empty()) return {};
  double aux = 0, imbalance = 0;
  for (const auto& load : taken_loads_) {
    aux += load->aux_loss();
    const torch::Tensor share = load->expert_load();
    imbalance = std::max(imbalance, share.max().item<double>() * static_cast<double>(share.size(0)));
  }
  return {{"moe_aux_loss", weight * aux / static_cast<double>(taken_loads_.size())},
          {"moe_load_imbalance", weight * imbalance}};
}

}  // namespace ferry
