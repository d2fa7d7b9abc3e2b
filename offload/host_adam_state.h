// HostAdamState: one trainable tensor's AdamW state in host memory, in every layout the CPU
// optimizer (kernels/cpu/adamw*.h) supports, and the one call that updates it. Both engines keep
// their host state in it: PlainEngine for CPU models, ChunkedEngine for every host chunk.
//
// Layouts (what is defined):
//   master          fp32 master weights; undefined when the weights are fp32 and updated in place
//                   (or aliasing them: the same buffer), and with a Kahan compensation;
//   compensation    offload.master_weights bf16_kahan, bf16 weights: the master is the weights plus
//                   this bf16 compensation (kernels/cpu/adamw_kahan.h);
//   stochastic      offload.master_weights bf16_stochastic, bf16 weights: no master and no
//                   compensation; the weights are the master, each update rounded stochastically
//                   with the bits of (rounding_seed, step, index) (kernels/cpu/adamw_stochastic.h);
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

// Which buffers one parameter's state has (the layouts above), decided once from the weights'
// dtype and offload.master_weights / optimizer_state; the host tier allocates them, the NVMe tier
// (offload/nvme_state_store.h) keeps them in its file.
struct StateLayout {
  bool master_is_weights = false;  // fp32 weights: updated in place, no master of their own
  bool master = false;             // a separate fp32 master
  bool compensation = false;       // bf16_kahan
  bool stochastic = false;         // bf16_stochastic
  uint64_t rounding_seed = 0;
  OptimizerState moments = OptimizerState::fp32;
};
StateLayout state_layout(at::ScalarType weights, MasterWeights master, OptimizerState moments, uint64_t rounding_seed);
// Bytes of n parameters' master (or compensation) in this layout.
uint64_t master_state_bytes(const StateLayout& layout, int64_t n);

struct HostAdamState {
  torch::Tensor master;
  torch::Tensor compensation;
  torch::Tensor exp_avg, exp_avg_sq;
  torch::Tensor exp_avg_codes, exp_avg_scale, exp_avg_sq_codes, exp_avg_sq_scale;
  bool stochastic = false;
  uint64_t rounding_seed = 0;  // per parameter (stochastic_rounding_seed)

  bool int8_moments() const { return exp_avg_codes.defined(); }
  kernels::Int8Moments int8_view() const;
  // The fp32 master is a buffer of its own, apart from `weights` (and not a Kahan pair).
  bool separate_master(const torch::Tensor& weights) const {
    return master.defined() && master.data_ptr() != weights.data_ptr();
  }

  // One AdamW step of `weights` (host, contiguous) with `grad` (host, contiguous, fp32, bf16 or
  // fp16) times grad_multiplier: the master (or the fp32 weights themselves) and the moments are
  // updated, and a separate master's new values are rounded into the weights.
  // `first`: the index of weights[0] in the whole parameter (the stochastic rounding's random bits
  // follow it; the NVMe tier updates a parameter window by window).
  void update(const kernels::AdamWParams& params, const torch::Tensor& weights, const torch::Tensor& grad,
              float grad_multiplier, kernels::ThreadPool* pool, int64_t first = 0);
  // After the weights were written (with_weights): they are the master from now on.
  void reset_master(const torch::Tensor& weights);

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

// The rounding seed of one parameter under bf16_stochastic: the run's seed (train.seed) mixed with
// the model's and parameter's names, so that no two tensors share their random bits and a resumed
// run (the same names, seed and step count) rounds exactly as the first.
uint64_t stochastic_rounding_seed(uint64_t run_seed, const std::string& model, const std::string& parameter);

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
