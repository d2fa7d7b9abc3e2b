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

namespace {

std::string prefix_of(const std::string& model, const std::string& parameter) { return model + "/" + parameter + "/"; }

}  // namespace

OptimizerStateWriter::OptimizerStateWriter(const std::filesystem::path& dir, const std::string& engine,
                                           const std::vector<ParameterStateShape>& parameters,
                                           const std::map<std::string, int64_t>& steps, const StateShard& shard) {
  std::map<std::string, std::string> metadata{{"ferry_engine", engine}, {"ferry_engine_version", "1"}};
  for (const auto& [model, count] : steps) metadata["steps." + model] = std::to_string(count);
  std::vector<io::TensorSlot> slots;
  for (const ParameterStateShape& p : parameters) {
    const std::string prefix = prefix_of(p.model, p.parameter);
    prefixes_.push_back(prefix);
    slots.push_back({prefix + "exp_avg", at::kFloat, p.shape});
    slots.push_back({prefix + "exp_avg_sq", at::kFloat, p.shape});
    if (p.master) slots.push_back({prefix + "master", at::kFloat, p.shape});
  }
  out_ = std::make_unique<io::SafetensorsWriter>(dir / shard.file_name(), slots, metadata);
}

OptimizerStateWriter::~OptimizerStateWriter() = default;

void OptimizerStateWriter::write(size_t parameter, int64_t first, const ParameterStateRef& slices) {
  const std::string& prefix = prefixes_.at(parameter);
  const auto put = [&](const char* name, const torch::Tensor& t) {
    if (!t.defined()) return;
    const torch::Tensor values = t.to(at::kFloat).contiguous();
    out_->write(prefix + name, static_cast<uint64_t>(first) * sizeof(float), values.data_ptr(), values.nbytes());
  };
  put("exp_avg", slices.exp_avg);
  put("exp_avg_sq", slices.exp_avg_sq);
  put("master", slices.master);
}

void OptimizerStateWriter::commit() { out_->commit(); }

void save_optimizer_state(const std::filesystem::path& dir, const std::string& engine,
                          const std::vector<ParameterStateRef>& parameters,
                          const std::map<std::string, int64_t>& steps, const StateShard& shard) {
  std::vector<ParameterStateShape> shapes;
  for (const ParameterStateRef& p : parameters) {
    shapes.push_back({p.model, p.parameter, p.exp_avg.sizes().vec(), p.master.defined()});
  }
  OptimizerStateWriter out(dir, engine, shapes, steps, shard);
  for (size_t i = 0; i < parameters.size(); ++i) out.write(i, 0, parameters[i]);
  out.commit();
}

OptimizerStateReader::OptimizerStateReader(const std::filesystem::path& dir,
                                           const std::vector<ParameterStateShape>& parameters,
                                           std::map<std::string, int64_t>& steps) {
  if (std::filesystem::exists(dir / kOptimizerStateFile)) {
    files_.emplace_back(dir / kOptimizerStateFile);
  } else {
    for (const auto& shard : shard_files(dir)) files_.emplace_back(shard);
    if (files_.empty()) {
      throw InputError((dir / kOptimizerStateFile).string() +
                       ": optimizer state is missing; the checkpoint is incomplete or not Ferry's");
    }
  }
  const std::string where = files_.size() == 1 ? files_.front().path().string()
                                               : dir.string() + " (optimizer state shards)";
  const auto& metadata = files_.front().metadata();
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
    for (const io::SafetensorsFile& f : files_) {
      if (f.contains(key)) return &f;
    }
    return nullptr;
  };
  for (const ParameterStateShape& p : parameters) {
    const std::string prefix = prefix_of(p.model, p.parameter);
    std::vector<std::string> wanted{prefix + "exp_avg", prefix + "exp_avg_sq"};
    if (p.master) wanted.push_back(prefix + "master");
    Held held;
    for (const std::string& key : wanted) {
      const io::SafetensorsFile* file = file_holding(key);
      if (file == nullptr) {
        throw InputError(where + ": missing '" + key + "' (was the checkpoint written for another model or precision?)");
      }
      if (file->info(key).shape != p.shape || file->info(key).dtype != at::kFloat) {
        throw InputError(file->path().string() + ": '" + key + "' has the wrong shape or dtype for this model");
      }
      held.push_back({file, key});
    }
    held_.push_back(std::move(held));
  }
  steps = std::move(found);
}

ParameterStateRef OptimizerStateReader::state(size_t parameter) const {
  const Held& held = held_.at(parameter);
  ParameterStateRef ref;
  ref.exp_avg = held[0].first->tensor(held[0].second);
  ref.exp_avg_sq = held[1].first->tensor(held[1].second);
  if (held.size() > 2) ref.master = held[2].first->tensor(held[2].second);
  return ref;
}

void load_optimizer_state(const std::filesystem::path& dir, const std::vector<ParameterStateRef>& parameters,
                          std::map<std::string, int64_t>& steps) {
  std::vector<ParameterStateShape> shapes;
  for (const ParameterStateRef& p : parameters) {
    shapes.push_back({p.model, p.parameter, p.exp_avg.sizes().vec(), p.master.defined()});
  }
  const OptimizerStateReader reader(dir, shapes, steps);  // checks everything before copying anything
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const ParameterStateRef saved = reader.state(i);
    parameters[i].exp_avg.copy_(saved.exp_avg);
    parameters[i].exp_avg_sq.copy_(saved.exp_avg_sq);
    if (parameters[i].master.defined()) parameters[i].master.copy_(saved.master);
  }
}

}  // namespace ferry::offload
