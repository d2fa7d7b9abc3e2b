// The routers' load over one forward of a Mixture-of-Experts model, and the load-balancing
// (auxiliary) loss transformers computes from it (load_balancing_loss_func, Switch Transformer eqs.
// 4-6): over every sparse layer's rows together,
//     aux = num_experts * sum_e  (assignments to e / rows) * (router probability of e summed / rows),
// padding rows left out. The training loss adds router_aux_loss_coef * aux.
//
// Each sparse layer records its rows here as it runs (sparse_moe_block.h). The loss' gradient
// reaches the routers without the layers handing their probabilities back: a layer's output passes
// through record(), which in backward gives that layer's probability sums their gradient,
// coef * num_experts * assignments_e / rows^2 times the loss' own scale. That scale is what
// loss_term() (added to the loss before backward) sees in backward, which autograd runs first (it is
// the newest node). So it works unchanged when the offload engine or activation checkpointing runs
// a layer again in backward: a layer recorded once is not counted twice.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

namespace ferry {

class RouterLoad : public std::enable_shared_from_this<RouterLoad> {
 public:
  // token_mask: (N) 1/0 over the rows every layer routes (B * T, row-major), or undefined: all count.
  // coef: router_aux_loss_coef; 0 records the load without any gradient.
  RouterLoad(int64_t num_experts, int64_t top_k, double coef, torch::Tensor token_mask);

  // Layer `layer`'s routing: logits and probabilities (N, E) (float, with their graph), chosen
  // experts (N, k). Returns `output` unchanged (in value), carrying the aux loss' gradient for
  // `probabilities`.
  torch::Tensor record(int64_t layer, const torch::Tensor& output, const torch::Tensor& logits,
                       const torch::Tensor& probabilities, const torch::Tensor& chosen);

  // Keep every layer's router logits and chosen experts (tests; the routing-identity check).
  void keep_routing() { keep_routing_ = true; }
  // By layer, (N, E): the layer's first forward.
  const std::map<int64_t, torch::Tensor>& router_logits() const { return logits_; }
  // By layer, every forward's chosen experts (N, k) in order: one for a training forward; for a
  // generation, the prefill's and then one per decode step.
  const std::map<int64_t, std::vector<torch::Tensor>>& chosen_experts() const { return chosen_; }

  // coef * aux as a scalar on `device`, for the training loss: its value is the loss term, and
  // through it backward learns the scale the loss was multiplied by.
  torch::Tensor loss_term(const c10::Device& device);

  double aux_loss() const;          // aux (without coef) over the layers recorded so far; 0 before any
  torch::Tensor expert_load() const;  // (E) share of the assignments each expert got, summing to 1
  int64_t layers_recorded() const { return static_cast<int64_t>(layers_.size()); }
  double coef() const { return coef_; }

  // In backward: the gradient each recorded layer's probability sums get (E), already scaled.
  torch::Tensor probability_gradient() const;
  void set_loss_scale(double scale) { loss_scale_ = scale; }

 private:
  int64_t num_experts_, top_k_;
  double coef_;
  torch::Tensor token_mask_;  // (N) float or undefined
  double mask_rows_ = 0;      // the rows token_mask_ counts (each layer routes them all)
  torch::Tensor assignments_;  // (E) float64 on the CPU: top-k choices per expert, padding left out
  torch::Tensor probability_sums_;  // (E) float64: router probabilities summed over rows (no graph)
  double rows_ = 0;
  double loss_scale_ = 0;  // 0 until loss_term's backward has run: no gradient without the term in the loss
  std::set<int64_t> layers_;
  bool keep_routing_ = false;
  std::map<int64_t, torch::Tensor> logits_;
  std::map<int64_t, std::vector<torch::Tensor>> chosen_;
};

}  // namespace ferry
