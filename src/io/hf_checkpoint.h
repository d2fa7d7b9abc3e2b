// The weights of a Hugging Face model folder: `model.safetensors`, or shards
// `model-00001-of-00003.safetensors` listed by `model.safetensors.index.json`
//   {"metadata": {"total_size": <bytes>}, "weight_map": {"<tensor name>": "<shard file>"}}.
// Reading checks that the index and the shards agree; writing shards greedily by size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/io/safetensors.h"

namespace ferry::io {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightsIndexFile = "model.safetensors.index.json";
// A folder Ferry prepared for a GGUF model (gguf_model_folder.h) links its file under this name.
inline constexpr const char* kGgufWeightsLink = "model.gguf";

class GgufWeights;

// "model-00002-of-00005.safetensors" for index 2 (1-based) of 5, as transformers names shards.
std::string hf_shard_file_name(int index, int count);

// Every weight of a model folder, opened (mapped and validated) but not copied. The offload
// engine takes zero-copy views from it; load_hf_weights copies everything. A Mixture of Experts
// saved in transformers 5's fused layout (mlp.experts.gate_up_proj (E, 2F, C) and
// mlp.experts.down_proj (E, C, F)) is served under the per-expert names transformers saves by
// default (mlp.experts.N.gate_proj.weight, up_proj, down_proj), each a zero-copy slice. A folder prepared for a
// GGUF model (no safetensors, a `model.gguf` link) serves the GGUF's tensors under their Hugging
// Face names instead, converted when asked for (gguf_model.h): tensor() then returns an owned copy.
class HfWeights {
 public:
  // Throws InputError naming the folder/file: no weights, bad index, missing shard, a tensor the
  // index lists but its shard lacks. Prefers model.safetensors when both layouts exist, as
  // transformers does.
  explicit HfWeights(const std::filesystem::path& model_dir);

  const std::vector<std::string>& names() const { return names_; }  // sorted
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  at::Tensor tensor(const std::string& name) const;  // zero-copy view (see SafetensorsFile::tensor)
  at::Tensor load(const std::string& name) const;    // owned copy
  TensorMap load_all() const;
  // The weight files, in shard order (one entry for model.safetensors; none for a GGUF model).
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The bytes of the weight files (the GGUF file's for a GGUF model).
  uint64_t file_bytes() const;
  // The GGUF model behind the folder, or nullptr.
  const GgufWeights* gguf() const { return gguf_.get(); }

 private:
  const SafetensorsFile& file_of(const std::string& name) const;
  void check_gguf_has(const std::string& name) const;

  std::filesystem::path model_dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> file_of_;  // tensor name -> index into files_
  // A per-expert name served from a fused tensor: its expert's rows [row, row + info.shape[0]).
  struct ExpertSlice {
    std::string fused;
    size_t file = 0;  // index into files_
    int64_t expert = 0, row = 0;
    TensorInfo info;
  };
  std::map<std::string, ExpertSlice> expert_slices_;
  void add_expert_slices();
  std::vector<std::string> names_;
  std::shared_ptr<const GgufWeights> gguf_;
};

// All weights of `model_dir` as owned CPU tensors, dtype as stored.
TensorMap load_hf_weights(const std::filesystem::path& model_dir);

// Writes `tensors` into `model_dir` (created if needed). max_shard_bytes == 0, or everything fits
// in one shard: model.safetensors. Otherwise shards of at most max_shard_bytes each (a larger
// tensor gets a shard of its own) plus the index, which is written last. Weight files of the other
// layout or of an older sharding left in the folder are removed, so the folder has one layout.
void save_hf_weights(const std::filesystem::path& model_dir, const TensorMap& tensors, uint64_t max_shard_bytes = 0);

}  // namespace ferry::io
