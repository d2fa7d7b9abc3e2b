// HostAdamState: one trainable tensor's AdamW state in host memory, in every layout the CPU
// optimizer (kernels/cpu/adamw*.h) supports, and the one call that updates it. Both engines keep
// their host state in it: PlainEngine for CPU models, ChunkedEngine for every host chunk.
//
// Layouts (what is defined):
//   master          fp32 master weights; undefined when the weights are fp32 and updated in place
//                   (or aliasing them: the same buffer), and with a Kahan compensation;
//   compensation    offload.master_weights bf16_kahan, bf16 weights: the master is the weights plus
//                   this bf16 compensation (kernels/cpu/adamw_kahan.h);
//   exp_avg, exp_avg_sq                    fp32 moments (offload.optimizer_state fp32);
//   exp_avg_codes/_scale, exp_avg_sq_codes/_scale   8-bit moments (int8, kernels/cpu/adamw_int8.h).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_int8.h"
#include "offload/optimizer_state_file.h"

namespace ferry::offload {

struct HostAdamState {
  torch::Tensor master;
  torch::Tensor compensation;
  torch::Tensor exp_avg, exp_avg_sq;
  torch::Tensor exp_avg_codes, exp_avg_scale, exp_avg_sq_codes, exp_avg_sq_scale;

  bool int8_moments() const { return exp_avg_codes.defined(); }
  kernels::Int8Moments int8_view() const;
  // The fp32 master is a buffer of its own, apart from `weights` (and not a Kahan pair).
  bool separate_master(const torch::Tensor& weights) const {
    return master.defined() && master.data_ptr() != weights.data_ptr();
  }

  // One AdamW step of `weights` (host, contiguous) with `grad` (host, contiguous, fp32, bf16 or
  // fp16) times grad_multiplier: the master (or the fp32 weights themselves) and the moments are
  // updated, and a separate master's new values are rounded into the weights.
  void update(const kernels::AdamWParams& params, const torch::Tensor& weights, const torch::Tensor& grad,
              float grad_multiplier, kernels::ThreadPool* pool);

  // The state as the optimizer state file holds it (offload/optimizer_state_file.h: fp32 moments,
  // an fp32 master unless the weights are fp32 themselves): the state's own buffers where they are
  // that already, else fresh fp32 buffers (int8 moments, a Kahan pair), filled with the decoded
  // values when `decoded` (to save) and left for load_optimizer_state to fill otherwise.
  ParameterStateRef as_saved(std::string model, std::string parameter, const torch::Tensor& weights,
                             bool decoded) const;
  // After load_optimizer_state filled `saved` (from as_saved(..., false)) and the weights were
  // loaded: re-encodes what the file held into the state's own layout.
  void restore_from_saved(const ParameterStateRef& saved, const torch::Tensor& weights);
};

// Host bytes of n parameters' moments in the configured format.
uint64_t host_moment_bytes(OptimizerState format, int64_t n);

// Zeroed moments of `like`'s shape in the configured format, made by `zeros(sizes, dtype)` (the
// engine's allocator: pinned host memory on a GPU machine).
template <typename Zeros>
void allocate_moments(HostAdamState& state, OptimizerState format, const torch::Tensor& like, Zeros zeros) {
  if (format == OptimizerState::int8) {
    const int64_t blocks = kernels::int8_moment_blocks(like.numel());
    state.exp_avg_codes = zeros(at::IntArrayRef{like.numel()}, at::kChar);
    state.exp_avg_sq_codes = zeros(at::IntArrayRef{like.numel()}, at::kByte);
    state.exp_avg_scale = zeros(at::IntArrayRef{blocks}, at::kFloat);
    state.exp_avg_sq_scale = zeros(at::IntArrayRef{blocks}, at::kFloat);  // all zero: m = v = 0
  } else {
    state.exp_avg = zeros(like.sizes(), at::kFloat);
    state.exp_avg_sq = zeros(like.sizes(), at::kFloat);
  }
}

}  // namespace ferry::offload
