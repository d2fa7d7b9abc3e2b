// Writing and reading optimizer_state.safetensors.
#include "offload/optimizer_state_file.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "src/io/safetensors.h"

namespace ferry::offload {

namespace {

constexpr const char* kShardPrefix = "optimizer_state.shard-";

// The shard files of `dir` (optimizer_state.shard-<r>-of-<N>.safetensors), by rank: all N of them,
// or an InputError naming what is missing or mixed.
std::vector<std::filesystem::path> shard_files(const std::filesystem::path& dir) {
  std::map<int64_t, std::filesystem::path> found;
  int64_t world = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kShardPrefix, 0) != 0) continue;
    long long rank = -1, of = -1;
    char tail[32] = {0};
    if (std::sscanf(name.c_str() + std::strlen(kShardPrefix), "%lld-of-%lld%31s", &rank, &of, tail) != 3 ||
        std::string(tail) != ".safetensors" || of < 1 || rank < 0 || rank >= of) {
      throw InputError((dir / name).string() + ": not an optimizer state shard name (optimizer_state.shard-R-of-N.safetensors)");
    }
    if (world != 0 && world != of) {
      throw InputError(dir.string() + ": optimizer state shards of runs with " + std::to_string(world) + " and " +
                       std::to_string(of) + " processes are mixed; the checkpoint is damaged");
    }
    world = of;
    found[rank] = entry.path();
  }
  std::vector<std::filesystem::path> files;
  for (int64_t r = 0; r < world; ++r) {
    auto it = found.find(r);
    if (it == found.end()) {
      throw InputError((dir / (std::string(kShardPrefix) + std::to_string(r) + "-of-" + std::to_string(world) +
                               ".safetensors")).string() +
                       ": this optimizer state shard is missing; the checkpoint is incomplete");
    }
    files.push_back(it->second);
  }
  return files;
}

}  // namespace

std::string StateShard::file_name() const {
  if (world <= 1) return kOptimizerStateFile;
  return std::string(kShardPrefix) + std::to_string(rank) + "-of-" + std::to_string(world) + ".safetensors";
}

void save_optimizer_state(const std::filesystem::path& dir, const std::string& engine,
                          const std::vector<ParameterStateRef>& parameters,
                          const std::map<std::string, int64_t>& steps, const StateShard& shard) {
  io::TensorMap tensors;
  std::map<std::string, std::string> metadata{{"ferry_engine", engine}, {"ferry_engine_version", "1"}};
  for (const auto& [model, count] : steps) metadata["steps." + model] = std::to_string(count);
  for (const ParameterStateRef& p : parameters) {
    const std::string prefix = p.model + "/" + p.parameter + "/";
    tensors[prefix + "exp_avg"] = p.exp_avg;
    tensors[prefix + "exp_avg_sq"] = p.exp_avg_sq;
    if (p.master.defined()) tensors[prefix + "master"] = p.master;
  }
  io::save_safetensors(dir / shard.file_name(), tensors, metadata);
}

void load_optimizer_state(const std::filesystem::path& dir, const std::vector<ParameterStateRef>& parameters,
                          std::map<std::string, int64_t>& steps) {
  std::vector<io::SafetensorsFile> files;
  if (std::filesystem::exists(dir / kOptimizerStateFile)) {
    files.emplace_back(dir / kOptimizerStateFile);
  } else {
    for (const auto& shard : shard_files(dir)) files.emplace_back(shard);
    if (files.empty()) {
      throw InputError((dir / kOptimizerStateFile).string() +
                       ": optimizer state is missing; the checkpoint is incomplete or not Ferry's");
    }
  }
  const std::string where = files.size() == 1 ? files.front().path().string()
                                              : dir.string() + " (optimizer state shards)";
  const auto& metadata = files.front().metadata();
  std::map<std::string, int64_t> found;
  for (const auto& [model, unused] : steps) {
    auto it = metadata.find("steps." + model);
    if (it == metadata.end()) throw InputError(where + ": holds no optimizer state for model '" + model + "'");
    try {
      found[model] = std::stoll(it->second);
    } catch (const std::exception&) {
      throw InputError(where + ": metadata steps." + model + " is not a number");
    }
  }
  const auto file_holding = [&](const std::string& key) -> const io::SafetensorsFile* {
    for (const io::SafetensorsFile& f : files) {
      if (f.contains(key)) return &f;
    }
    return nullptr;
  };
  std::vector<std::tuple<torch::Tensor, std::string, const io::SafetensorsFile*>> copies;
  for (const ParameterStateRef& p : parameters) {
    const std::string prefix = p.model + "/" + p.parameter + "/";
    std::vector<std::pair<torch::Tensor, std::string>> wanted{{p.exp_avg, prefix + "exp_avg"},
                                                              {p.exp_avg_sq, prefix + "exp_avg_sq"}};
    if (p.master.defined()) wanted.emplace_back(p.master, prefix + "master");
    for (auto& [target, key] : wanted) {
      const io::SafetensorsFile* file = file_holding(key);
      if (file == nullptr) {
        throw InputError(where + ": missing '" + key + "' (was the checkpoint written for another model or precision?)");
      }
      if (file->info(key).shape != target.sizes().vec() || file->info(key).dtype != at::kFloat) {
        throw InputError(file->path().string() + ": '" + key + "' has the wrong shape or dtype for this model");
      }
      copies.emplace_back(target, key, file);
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [target, key, file] : copies) target.copy_(file->tensor(key));
  steps = std::move(found);
}

}  // namespace ferry::offload
