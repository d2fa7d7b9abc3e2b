// The cached reference log-probs of DPO's `precompute` (see reference_logps_cache.h).
#include "train/preference/reference_logps_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "core/file_util.h"
#include "core/fnv1a.h"
#include "src/io/safetensors.h"
#include "train/preference/preference_batches.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

std::string fingerprint_of(const std::string& reference_identity, const std::vector<PreferencePair>& train,
                           const std::vector<PreferencePair>& eval) {
  Fnv1a hash;
  hash.add(reference_identity);
  for (const auto* pairs : {&train, &eval}) {
    const uint64_t count = pairs->size();
    hash.add(&count, sizeof count);
    for (const PreferencePair& p : *pairs) {
      for (const TokenizedSample* s : {&p.chosen, &p.rejected}) {
        hash.add(s->ids);
        hash.add(s->loss_mask);
      }
    }
  }
  return hash.hex();
}

// (N, 2) fp64: each pair's chosen and rejected reference log-probs.
at::Tensor table_of(const std::vector<PreferencePair>& pairs) {
  at::Tensor table = at::empty({static_cast<int64_t>(pairs.size()), 2}, at::kDouble);
  auto a = table.accessor<double, 2>();
  for (size_t i = 0; i < pairs.size(); ++i) {
    a[static_cast<int64_t>(i)][0] = *pairs[i].reference_chosen_logps;
    a[static_cast<int64_t>(i)][1] = *pairs[i].reference_rejected_logps;
  }
  return table;
}

void fill_from_table(std::vector<PreferencePair>& pairs, const at::Tensor& table) {
  const at::Tensor t = table.to(at::kDouble).contiguous();
  FERRY_CHECK(t.dim() == 2 && t.size(0) == static_cast<int64_t>(pairs.size()) && t.size(1) == 2,
              "reference log-prob table of the wrong shape");
  auto a = t.accessor<double, 2>();
  for (size_t i = 0; i < pairs.size(); ++i) {
    pairs[i].reference_chosen_logps = a[static_cast<int64_t>(i)][0];
    pairs[i].reference_rejected_logps = a[static_cast<int64_t>(i)][1];
  }
}

void compute_into(std::vector<PreferencePair>& pairs, int64_t batch_size, int64_t pad_id,
                  const std::function<torch::Tensor(const MicroBatch&)>& compute) {
  for (size_t begin = 0; begin < pairs.size(); begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(pairs.size(), begin + static_cast<size_t>(batch_size));
    std::vector<const PreferencePair*> batch;
    for (size_t i = begin; i < end; ++i) batch.push_back(&pairs[i]);
    const at::Tensor logps = compute(collate_preference_pairs(batch, pad_id)).to(at::kCPU, at::kDouble);  // (2B)
    const int64_t b = static_cast<int64_t>(batch.size());
    for (int64_t i = 0; i < b; ++i) {
      pairs[begin + static_cast<size_t>(i)].reference_chosen_logps = logps[i].item<double>();
      pairs[begin + static_cast<size_t>(i)].reference_rejected_logps = logps[b + i].item<double>();
    }
  }
}

}  // namespace

std::string model_folder_identity(const fs::path& folder) {
  std::string identity = fs::absolute(folder).lexically_normal().string();
  std::error_code error;
  if (fs::exists(folder / "config.json", error)) identity.append("\n").append(read_file(folder / "config.json"));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.find(".safetensors") == std::string::npos) continue;
    const auto time = fs::last_write_time(entry.path(), error).time_since_epoch().count();
    files.push_back(name + " " + std::to_string(entry.file_size(error)) + " " + std::to_string(time));
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) identity.append("\n").append(f);
  return identity;
}

bool fill_reference_logps(std::vector<PreferencePair>& train, std::vector<PreferencePair>& eval,
                          const fs::path& cache_file, const std::string& reference_identity, int64_t batch_size,
                          int64_t pad_id, const std::function<torch::Tensor(const MicroBatch&)>& compute,
                          std::ostream& log, const std::string& unit) {
  const std::string fingerprint = fingerprint_of(reference_identity, train, eval);
  if (fs::exists(cache_file)) {
    try {
      const io::SafetensorsFile file(cache_file);
      const auto found = file.metadata().find("fingerprint");
      if (found != file.metadata().end() && found->second == fingerprint) {
        fill_from_table(train, file.load("train"));
        if (!eval.empty()) fill_from_table(eval, file.load("eval"));
        log << "reference log-probs: read from " << cache_file.string() << "\n";
        return true;
      }
      log << "reference log-probs: " << cache_file.string()
          << " was made for other " << unit << " or another reference model; computing them again\n";
    } catch (const Error& e) {
      log << "reference log-probs: " << cache_file.string() << " cannot be used (" << e.what()
          << "); computing them again\n";
    }
  }
  compute_into(train, batch_size, pad_id, compute);
  compute_into(eval, batch_size, pad_id, compute);
  io::TensorMap tables{{"train", table_of(train)}};
  if (!eval.empty()) tables["eval"] = table_of(eval);
  fs::create_directories(cache_file.parent_path());
  io::save_safetensors(cache_file, tables, {{"fingerprint", fingerprint}});
  log << "reference log-probs: " << train.size() << " + " << eval.size() << " " << unit << " computed once, cached in "
      << cache_file.string() << "\n";
  return false;
}

}  // namespace ferry
