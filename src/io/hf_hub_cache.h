// The local Hugging Face hub cache, read without any network: where `huggingface-cli download`,
// `from_pretrained` and `load_dataset` keep what they fetched.
//   root: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
//         ~/.cache/huggingface/hub (huggingface_hub's own order)
//   a repo: ROOT/models--ORG--NAME or ROOT/datasets--ORG--NAME, whose snapshots/<revision>/ hold
//         the files (links into blobs/); refs/main names the revision last fetched.
// A model named ORG/NAME resolves to its newest snapshot folder; a dataset to its Parquet files
// for one split. What is not there is an InputError saying where Ferry looked and what the cache
// holds.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::io {

enum class HubRepoKind { model, dataset };

// The cache root (see above; it need not exist).
std::filesystem::path hub_cache_root();

// True for "ORG/NAME" (one slash, neither part empty, no spaces): a name the hub cache may hold.
bool looks_like_hub_repo_id(const std::string& name);

// The snapshot folder of `repo_id` (ORG/NAME): refs/main's revision when it is there, else the
// most recently modified snapshot. nullopt when the cache does not hold the repo.
std::optional<std::filesystem::path> find_hub_snapshot(HubRepoKind kind, const std::string& repo_id);

// The ORG/NAME of every repo of `kind` in the cache, sorted (for error messages).
std::vector<std::string> hub_cache_repos(HubRepoKind kind);

// The Parquet files of a dataset in the cache, for `spec` = ORG/NAME[/SUBSET][:SPLIT] (split
// `train` when not given): the snapshot's *.parquet files whose name starts with the split
// (`data/train-00000-of-00002.parquet`) or that sit in a folder named after it
// (`default/train/0000.parquet`), restricted to SUBSET's folder when given, sorted by path.
// InputError naming what is missing: the repo (with what the cache holds), or the split (with the
// files the snapshot has).
std::vector<std::filesystem::path> hub_dataset_parquet_files(const std::string& spec);

}  // namespace ferry::io
