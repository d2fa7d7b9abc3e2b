// The causal-LM loss over label tokens (see causal_lm_loss.h).
#include "train/causal_lm_loss.h"

#include "kernels/ops/chunked_lm_head.h"
#include "src/data/token_batch.h"
#include "train/backbone_runner.h"

namespace ferry {

torch::Tensor causal_lm_loss_sum(BackboneRunner& runner, const std::string& model, CausalLMImpl& lm,
                                 const MicroBatch& batch) {
  const torch::Tensor& labels = batch.at("labels");
  // (B, T-1) flattened; kIgnoreLabel is negative.
  const torch::Tensor targets = labels.narrow(1, 1, labels.size(1) - 1).reshape({-1}).to(lm.head_weight().device());
  return runner.causal_lm_head(model, lm, batch.at("input_ids"), batch.at("attention_mask"), batch.at("position_ids"), 0,
                               labels.size(1) - 1,
                               [chunk = runner.logits_chunk(), targets](const torch::Tensor& hidden, const torch::Tensor& weight,
                                                                         double softcap) {
                                 return kernels::lm_head_nll_sum(hidden.reshape({-1, hidden.size(-1)}), weight, targets,
                                                                 chunk, softcap);
                               });
}

int64_t shifted_label_count(const torch::Tensor& labels) {
  return labels.narrow(1, 1, labels.size(1) - 1).ne(kIgnoreLabel).sum().item<int64_t>();
}

LossSum SftObjective::loss(const MicroBatch& batch, BackboneRunner& runner) {
  return {causal_lm_loss_sum(runner, name_, model_, batch), {}};
}

}  // namespace ferry
