// DiLoCo, distributed.mode diloco (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication
// Training of Language Models"): data parallelism for slow links between machines.
//
// Every process trains on its own share of the batches with its own AdamW (the inner optimizer,
// the engine's) for distributed.inner_steps steps, exchanging nothing but the step's loss. Then the
// processes average their pseudo-gradients Δ = θ_outer − θ_local and take one outer Nesterov SGD
// step, as torch.optim.SGD(nesterov=True) does:
//   b ← μ·b + mean(Δ);   θ_outer ← θ_outer − outer_lr·(mean(Δ) + μ·b)
// and every process goes on from the new θ_outer (with the defaults outer_lr 1, μ 0: the mean of
// the processes' weights). Only trainable parameters take part (with LoRA, the adapters). Δ travels as distributed.pseudo_gradient:
//   fp32  one all-reduce of the fp32 values;
//   bf16  an all-gather of the bf16 values;
//   int8  an all-gather of int8 codes with one fp32 absmax scale per 256 values (≈ 1.016 bytes
//         per value).
// Gathered contributions are decoded and summed in rank order, so every process computes the same
// θ_outer bit for bit. θ_outer and b are fp32 copies on the host (8 bytes per trainable value).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine.h"
#include "src/dist/communicator.h"

namespace ferry {

class DiLoCo {
 public:
  DiLoCo(const DistributedConfig& config, dist::Communicator& comm, offload::ParameterEngine& engine, std::string model);

  // θ_outer from the model's current weights (at the start, and after a resume has loaded them).
  void start();
  // The outer step (every process calls it): averages the pseudo-gradients and sets the model's
  // weights to the new θ_outer on every process.
  void synchronize();
  int64_t outer_steps() const { return outer_steps_; }

  // The outer momentum and step count, dir/diloco_state.safetensors (the same on every process).
  void save(const std::filesystem::path& dir) const;
  // InputError naming the file when it is missing or does not fit the model (the trainer starts
  // DiLoCo afresh from a checkpoint without one: a run that switched to diloco).
  void load(const std::filesystem::path& dir);

  static constexpr const char* kStateFile = "diloco_state.safetensors";
  static constexpr int64_t kInt8Block = 256;

 private:
  // The mean over the processes of `delta` (flat fp32), as the configured format carries it.
  torch::Tensor average(const torch::Tensor& delta);

  DistributedConfig config_;
  dist::Communicator& comm_;
  offload::ParameterEngine& engine_;
  std::string model_;
  std::vector<std::string> names_;
  std::vector<int64_t> numels_;
  torch::Tensor outer_;     // θ_outer, flat fp32
  torch::Tensor momentum_;  // b, flat fp32
  int64_t outer_steps_ = 0;
};

}  // namespace ferry
