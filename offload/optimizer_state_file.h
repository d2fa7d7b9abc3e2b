// The optimizer state file every engine writes into a checkpoint folder
// (optimizer_state.safetensors): per trainable parameter `<model>/<name>/exp_avg`, `exp_avg_sq`
// and, for bf16/fp16 models, `master` (fp32), plus metadata `steps.<model>` (Adam's step count).
// The format does not depend on the policy, so a run saved under one offload policy resumes under
// another.
//
// A ZeRO-sharded run (distributed.zero_stage >= 1) saves one file per process instead,
// `optimizer_state.shard-<rank>-of-<N>.safetensors`, each holding the parameters that process
// owns, with the same names and metadata. Loading reads each parameter from whichever file holds
// it, so a checkpoint of N processes resumes on any number of processes, one included.
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

// Which file of a checkpoint a process writes: the whole state (world 1), or its shard.
struct StateShard {
  int64_t rank = 0;
  int64_t world = 1;
  std::string file_name() const;  // kOptimizerStateFile when world is 1
};

void save_optimizer_state(const std::filesystem::path& dir, const std::string& engine,
                          const std::vector<ParameterStateRef>& parameters,
                          const std::map<std::string, int64_t>& steps, const StateShard& shard = {});

// Reads kOptimizerStateFile, or else every shard file (all N of them must be there). Checks every
// name, shape and dtype before copying anything (InputError naming the file and the tensor), then
// copies into the given tensors and fills `steps` for the models listed in it.
void load_optimizer_state(const std::filesystem::path& dir, const std::vector<ParameterStateRef>& parameters,
                          std::map<std::string, int64_t>& steps);

}  // namespace ferry::offload
