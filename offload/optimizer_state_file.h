// The optimizer state file every engine writes into a checkpoint folder
// (optimizer_state.safetensors): per trainable parameter `<model>/<name>/exp_avg`, `exp_avg_sq`
// and, for bf16/fp16 models, `master` (fp32), plus metadata `steps.<model>` (Adam's step count).
// The format does not depend on the policy, so a run saved under one offload policy resumes under
// another.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ferry::offload {

// One parameter's state; `master` is undefined when the model's weights are fp32 themselves.
struct ParameterStateRef {
  std::string model;
  std::string parameter;
  torch::Tensor exp_avg, exp_avg_sq, master;  // fp32; loading copies into these
};

inline constexpr const char* kOptimizerStateFile = "optimizer_state.safetensors";

void save_optimizer_state(const std::filesystem::path& dir, const std::string& engine,
                          const std::vector<ParameterStateRef>& parameters,
                          const std::map<std::string, int64_t>& steps);

// Checks every name, shape and dtype before copying anything (InputError naming the file and the
// tensor), then copies into the given tensors and fills `steps` for the models listed in it.
void load_optimizer_state(const std::filesystem::path& dir, const std::vector<ParameterStateRef>& parameters,
                          std::map<std::string, int64_t>& steps);

}  // namespace ferry::offload
