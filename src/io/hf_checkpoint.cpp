// Single-file and sharded Hugging Face weights (see hf_checkpoint.h).
#include "src/io/hf_checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/file_util.h"
#include "core/folder_file.h"
#include "src/io/gguf_model.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

bool is_shard_file_name(const std::string& name) {
  static const std::regex pattern(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, pattern);
}

// The weight_map of an index file: tensor name -> shard file name, checked to stay in the folder.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  const std::string where = index_path.string();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where + ": not valid JSON (" + e.what() + "); the file is corrupt");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw InputError(where + ": has no \"weight_map\" object; a sharded checkpoint index maps tensor names to shard files");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) throw InputError(where + ": weight_map entry '" + name + "' is not a file name string");
    const fs::path relative(file.get<std::string>());
    bool escapes = relative.empty() || relative.is_absolute();
    for (const auto& part : relative) escapes = escapes || part == "..";
    if (escapes) {
      throw InputError(where + ": weight_map entry '" + name + "' points at '" + relative.string() +
                       "', outside the model folder");
    }
    weight_map.emplace(name, relative.string());
  }
  if (weight_map.empty()) throw InputError(where + ": \"weight_map\" is empty; the index lists no tensors");
  return weight_map;
}

}  // namespace

std::string hf_shard_file_name(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", index, count);
  return name;
}

HfWeights::HfWeights(const fs::path& model_dir) : model_dir_(model_dir) {
  if (!fs::is_directory(model_dir)) {
    throw InputError("model folder '" + model_dir.string() + "' does not exist or is not a folder");
  }
  const fs::path single = model_dir / kHfWeightsFile;
  const fs::path index_path = model_dir / kHfWeightsIndexFile;
  if (fs::exists(single)) {
    files_.emplace_back(checked_folder_file(model_dir, single));
    for (const auto& name : files_.back().names()) file_of_.emplace(name, 0);
  } else if (fs::exists(index_path)) {
    const auto weight_map = read_weight_map(index_path);
    std::map<std::string, size_t> file_index;  // shard file name -> index into files_
    std::map<std::string, std::vector<std::string>> tensors_of;
    for (const auto& [name, file] : weight_map) tensors_of[file].push_back(name);
    for (const auto& [file, names] : tensors_of) {
      const fs::path shard = model_dir / file;
      if (!fs::exists(shard)) {
        throw InputError(index_path.string() + ": lists shard '" + file + "' (holding tensor '" + names.front() + "' and " +
                         std::to_string(names.size() - 1) + " others), but " + shard.string() +
                         " is missing; the download or copy is incomplete");
      }
      files_.emplace_back(checked_folder_file(model_dir, shard));
      const SafetensorsFile& opened = files_.back();
      for (const auto& name : names) {
        if (!opened.contains(name)) {
          throw InputError(index_path.string() + ": says tensor '" + name + "' is in '" + file +
                           "', but that shard does not contain it; the index and shards are from different checkpoints");
        }
        file_of_.emplace(name, files_.size() - 1);
      }
    }
  } else if (fs::exists(model_dir / kGgufWeightsLink)) {
    gguf_ = std::make_shared<const GgufWeights>(GgufFile::open(model_dir / kGgufWeightsLink));
    names_ = gguf_->names();
    return;
  } else {
    std::string hint;
    if (fs::exists(model_dir / "pytorch_model.bin") || fs::exists(model_dir / "pytorch_model.bin.index.json")) {
      hint = "; it has PyTorch .bin weights, which Ferry does not read: convert them with transformers, "
             "model.save_pretrained(folder, safe_serialization=True)";
    }
    throw InputError("model folder '" + model_dir.string() + "' has neither " + kHfWeightsFile + " nor " +
                     kHfWeightsIndexFile + hint);
  }
  add_expert_slices();
  for (const auto& entry : file_of_) names_.push_back(entry.first);
  for (const auto& entry : expert_slices_) names_.push_back(entry.first);
  std::sort(names_.begin(), names_.end());
}

void HfWeights::add_expert_slices() {
  std::vector<std::string> fused;
  for (const auto& [name, file] : file_of_) {
    if (name.ends_with(".experts.gate_up_proj") || name.ends_with(".experts.down_proj")) fused.push_back(name);
  }
  for (const std::string& name : fused) {
    const size_t file = file_of_.at(name);
    const TensorInfo& info = files_[file].info(name);
    if (info.shape.size() != 3) {
      throw InputError("model folder '" + model_dir_.string() + "': fused expert weight '" + name + "' has " +
                       std::to_string(info.shape.size()) + " dimensions; expected 3 (experts, rows, columns)");
    }
    const int64_t experts = info.shape[0], rows = info.shape[1], columns = info.shape[2];
    const bool gate_up = name.ends_with("gate_up_proj");
    if (gate_up && rows % 2 != 0) {
      throw InputError("model folder '" + model_dir_.string() + "': fused expert weight '" + name + "' has " +
                       std::to_string(rows) + " rows per expert; gate_up_proj holds the gate's rows, then the up's");
    }
    const std::string prefix = name.substr(0, name.rfind('.') + 1);  // "...mlp.experts."
    const uint64_t row_bytes = static_cast<uint64_t>(columns) * c10::elementSize(info.dtype);
    const auto add = [&](int64_t e, const std::string& projection, int64_t row, int64_t count) {
      ExpertSlice slice{name, file, e, row, info};
      slice.info.shape = {count, columns};
      slice.info.begin = info.begin + (static_cast<uint64_t>(e * rows + row)) * row_bytes;
      slice.info.end = slice.info.begin + static_cast<uint64_t>(count) * row_bytes;
      expert_slices_.emplace(prefix + std::to_string(e) + "." + projection + ".weight", std::move(slice));
    };
    for (int64_t e = 0; e < experts; ++e) {
      if (gate_up) {
        add(e, "gate_proj", 0, rows / 2);
        add(e, "up_proj", rows / 2, rows / 2);
      } else {
        add(e, "down_proj", 0, rows);
      }
    }
    file_of_.erase(name);
  }
}

const SafetensorsFile& HfWeights::file_of(const std::string& name) const {
  const auto found = file_of_.find(name);
  if (found == file_of_.end()) {
    throw InputError("model folder '" + model_dir_.string() + "' has no weight '" + name + "'");
  }
  return files_[found->second];
}

bool HfWeights::contains(const std::string& name) const {
  return gguf_ ? gguf_->contains(name) : file_of_.count(name) != 0 || expert_slices_.count(name) != 0;
}

void HfWeights::check_gguf_has(const std::string& name) const {
  if (!gguf_->contains(name)) {
    throw InputError("model '" + gguf_->file().path().string() + "' has no weight '" + name + "'");
  }
}

const TensorInfo& HfWeights::info(const std::string& name) const {
  if (gguf_) return check_gguf_has(name), gguf_->info(name);
  if (const auto slice = expert_slices_.find(name); slice != expert_slices_.end()) return slice->second.info;
  return file_of(name).info(name);
}

at::Tensor HfWeights::tensor(const std::string& name) const {
  if (gguf_) return check_gguf_has(name), gguf_->load(name);
  if (const auto slice = expert_slices_.find(name); slice != expert_slices_.end()) {
    const ExpertSlice& s = slice->second;
    return files_[s.file].tensor(s.fused)[s.expert].narrow(0, s.row, s.info.shape[0]);
  }
  return file_of(name).tensor(name);
}

at::Tensor HfWeights::load(const std::string& name) const {
  if (gguf_) return check_gguf_has(name), gguf_->load(name);
  if (expert_slices_.count(name) != 0) return tensor(name).clone();
  return file_of(name).load(name);
}

uint64_t HfWeights::file_bytes() const {
  if (gguf_) return gguf_->file().file_bytes();
  uint64_t bytes = 0;
  for (const SafetensorsFile& file : files_) bytes += fs::file_size(file.path());
  return bytes;
}

TensorMap HfWeights::load_all() const {
  TensorMap out;
  for (const auto& name : names_) out.emplace(name, load(name));
  return out;
}

TensorMap load_hf_weights(const fs::path& model_dir) { return HfWeights(model_dir).load_all(); }

void save_hf_weights(const fs::path& model_dir, const TensorMap& tensors, uint64_t max_shard_bytes) {
  // Greedy packing in name order: a shard is closed when the next tensor would overflow it.
  std::vector<std::vector<const TensorMap::value_type*>> shards(1);
  uint64_t shard_bytes = 0;
  uint64_t total_bytes = 0;
  for (const auto& entry : tensors) {
    const uint64_t nbytes = static_cast<uint64_t>(entry.second.numel()) * entry.second.element_size();
    if (max_shard_bytes > 0 && !shards.back().empty() && shard_bytes + nbytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&entry);
    shard_bytes += nbytes;
    total_bytes += nbytes;
  }

  std::set<std::string> written;
  if (shards.size() == 1) {
    save_safetensors(model_dir / kHfWeightsFile, tensors);
    written.insert(kHfWeightsFile);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    const int count = static_cast<int>(shards.size());
    for (int i = 0; i < count; ++i) {
      const std::string file = hf_shard_file_name(i + 1, count);
      TensorMap shard;
      for (const auto* entry : shards[i]) {
        shard.emplace(entry->first, entry->second);
        weight_map[entry->first] = file;
      }
      save_safetensors(model_dir / file, shard);
      written.insert(file);
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    write_file_atomic(model_dir / kHfWeightsIndexFile, index.dump(2) + "\n");
    written.insert(kHfWeightsIndexFile);
  }

  // One layout per folder: a stale index or shard set would shadow or confuse the new weights.
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    const std::string name = entry.path().filename().string();
    const bool weight_file = name == kHfWeightsFile || name == kHfWeightsIndexFile || is_shard_file_name(name);
    if (weight_file && written.count(name) == 0) stale.push_back(entry.path());
  }
  for (const auto& path : stale) {
    std::error_code ignored;
    fs::remove(path, ignored);
  }
}

}  // namespace ferry::io
