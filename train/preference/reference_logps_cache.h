// DPO's `precompute` reference: the reference model's log-probs of every preference pair, computed
// once before training (the live policy still holds the reference weights then) and kept in
// output.dir/reference_logps.safetensors, so a resumed run — whose policy has moved on — reads them
// back instead of needing the reference again. The file's fingerprint covers the reference model
// folder (path, config.json, weight file sizes and times) and every pair's token ids and masks; a
// cache that does not match is recomputed, never silently used.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "src/data/preference_dataset.h"
#include "train/training_task.h"

namespace ferry {

// A fingerprint of a model folder: its path, config.json and the sizes and times of its weight files.
std::string model_folder_identity(const std::filesystem::path& folder);

// Fills reference_chosen_logps / reference_rejected_logps of every pair in `train` and `eval`:
// from `cache_file` when its fingerprint (of `reference_identity` and the pairs) matches, else with
// `compute` (a collated micro-batch of `batch_size` pairs -> (2B) summed log-probs, chosen rows
// first), then written to `cache_file` atomically. Returns true when the cache was used. `unit`
// names the pairs in the log ("pairs"; KTO's "examples with their KL rows").
bool fill_reference_logps(std::vector<PreferencePair>& train, std::vector<PreferencePair>& eval,
                          const std::filesystem::path& cache_file, const std::string& reference_identity,
                          int64_t batch_size, int64_t pad_id,
                          const std::function<torch::Tensor(const MicroBatch&)>& compute, std::ostream& log,
                          const std::string& unit = "pairs");

}  // namespace ferry
