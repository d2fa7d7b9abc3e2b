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
#include <memory>
#include <string>
#include <vector>

#include "src/io/safetensors.h"

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

// The file's layout for one parameter: its shape, and whether it has a master.
struct ParameterStateShape {
  std::string model;
  std::string parameter;
  std::vector<int64_t> shape;
  bool master = false;
};

// The file written in pieces, for state too large to hold in memory at once (the NVMe tier): the
// layout first, then each parameter's state window by window, then commit() (atomic, and checks
// that every byte was written).
class OptimizerStateWriter {
 public:
  OptimizerStateWriter(const std::filesystem::path& dir, const std::string& engine,
                       const std::vector<ParameterStateShape>& parameters, const std::map<std::string, int64_t>& steps,
                       const StateShard& shard = {});
  ~OptimizerStateWriter();
  // Elements [first, first + n) of parameter `parameter`'s state, from `slices`' tensors of n
  // elements each (master undefined when it has none).
  void write(size_t parameter, int64_t first, const ParameterStateRef& slices);
  void commit();

 private:
  std::vector<std::string> prefixes_;
  std::unique_ptr<io::SafetensorsWriter> out_;
};

// The file(s) of a checkpoint open for reading: every parameter's tensors are checked (names,
// shapes, dtype) and `steps` filled for its models on construction (InputError naming the file),
// then state(i) gives parameter i's state as views over the mapped files, without copying.
class OptimizerStateReader {
 public:
  OptimizerStateReader(const std::filesystem::path& dir, const std::vector<ParameterStateShape>& parameters,
                       std::map<std::string, int64_t>& steps);
  OptimizerStateReader(const OptimizerStateReader&) = delete;  // holds pointers into its files
  OptimizerStateReader& operator=(const OptimizerStateReader&) = delete;
  ParameterStateRef state(size_t parameter) const;

 private:
  using Held = std::vector<std::pair<const io::SafetensorsFile*, std::string>>;
  std::vector<io::SafetensorsFile> files_;
  std::vector<Held> held_;
};

// Reads kOptimizerStateFile, or else every shard file (all N of them must be there). Checks every
// name, shape and dtype before copying anything (InputError naming the file and the tensor), then
// copies into the given tensors and fills `steps` for the models listed in it.
void load_optimizer_state(const std::filesystem::path& dir, const std::vector<ParameterStateRef>& parameters,
                          std::map<std::string, int64_t>& steps);

}  // namespace ferry::offload
