// The local Hugging Face hub cache (see hf_hub_cache.h).
#include "src/io/hf_hub_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <system_error>

#include "core/error.h"
#include "core/file_util.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

const char* kind_prefix(HubRepoKind kind) { return kind == HubRepoKind::model ? "models--" : "datasets--"; }

fs::path repo_folder(HubRepoKind kind, const std::string& repo_id) {
  std::string name = kind_prefix(kind);
  for (char c : repo_id) name += c == '/' ? std::string("--") : std::string(1, c);
  return hub_cache_root() / name;
}

std::string trim_revision(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string join(const std::vector<std::string>& items, size_t limit) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > limit) out += detail::concat(", ... (", items.size(), " in all)");
  return out.empty() ? "nothing" : out;
}

}  // namespace

fs::path hub_cache_root() {
  if (const char* v = env("HF_HUB_CACHE")) return v;
  if (const char* v = env("HUGGINGFACE_HUB_CACHE")) return v;
  if (const char* v = env("HF_HOME")) return fs::path(v) / "hub";
  if (const char* v = env("XDG_CACHE_HOME")) return fs::path(v) / "huggingface" / "hub";
  const char* home = env("HOME");
  return fs::path(home != nullptr ? home : ".") / ".cache" / "huggingface" / "hub";
}

bool looks_like_hub_repo_id(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= name.size()) return false;
  if (name.find('/', slash + 1) != std::string::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '-' || c == '_' || c == '.';
  });
}

std::optional<fs::path> find_hub_snapshot(HubRepoKind kind, const std::string& repo_id) {
  const fs::path repo = repo_folder(kind, repo_id);
  const fs::path snapshots = repo / "snapshots";
  std::error_code error;
  if (!fs::is_directory(snapshots, error)) return std::nullopt;
  if (fs::exists(repo / "refs" / "main", error)) {
    const fs::path named = snapshots / trim_revision(read_file(repo / "refs" / "main"));
    if (fs::is_directory(named, error)) return named;
  }
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  for (const auto& entry : fs::directory_iterator(snapshots, error)) {
    if (!entry.is_directory(error)) continue;
    const auto time = fs::last_write_time(entry.path(), error);
    if (!newest || time > newest_time) newest = entry.path(), newest_time = time;
  }
  return newest;
}

std::vector<std::string> hub_cache_repos(HubRepoKind kind) {
  std::vector<std::string> out;
  std::error_code error;
  const std::string prefix = kind_prefix(kind);
  for (const auto& entry : fs::directory_iterator(hub_cache_root(), error)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    name = name.substr(prefix.size());
    if (const size_t at = name.find("--"); at != std::string::npos) name.replace(at, 2, "/");
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> hub_dataset_parquet_files(const std::string& spec) {
  std::string name = spec, split = "train", subset;
  if (const size_t colon = name.find(':'); colon != std::string::npos) {
    split = name.substr(colon + 1);
    name = name.substr(0, colon);
  }
  if (const size_t second = name.find('/', name.find('/') + 1); second != std::string::npos) {
    subset = name.substr(second + 1);
    name = name.substr(0, second);
  }
  if (!looks_like_hub_repo_id(name) || split.empty()) {
    throw InputError("hf:" + spec + ": expected hf:ORG/NAME[/SUBSET][:SPLIT], e.g. hf:trl-lib/tldr:train");
  }
  const auto snapshot = find_hub_snapshot(HubRepoKind::dataset, name);
  if (!snapshot) {
    throw InputError(detail::concat("hf:", spec, ": the dataset ", name, " is not in the Hugging Face cache (looked in ",
                                    repo_folder(HubRepoKind::dataset, name).string(), "; the cache holds datasets: ",
                                    join(hub_cache_repos(HubRepoKind::dataset), 12),
                                    "). Fetch it once with `huggingface-cli download --repo-type dataset ", name,
                                    "` or `datasets.load_dataset(\"", name, "\")`, or set HF_HOME / HF_HUB_CACHE"));
  }
  std::vector<fs::path> files;
  std::vector<std::string> seen;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(*snapshot, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    const fs::path& path = it->path();
    if (path.extension() != ".parquet") continue;
    const fs::path relative = fs::relative(path, *snapshot);
    seen.push_back(relative.string());
    bool in_subset = subset.empty(), in_split = false;
    const std::string stem = path.filename().string();
    if (stem.rfind(split, 0) == 0 && stem.size() > split.size() &&
        (stem[split.size()] == '-' || stem[split.size()] == '.' || stem[split.size()] == '_')) {
      in_split = true;
    }
    for (const auto& part : relative.parent_path()) {
      if (part == split) in_split = true;
      if (part == subset) in_subset = true;
    }
    if (in_split && in_subset) files.push_back(path);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::sort(seen.begin(), seen.end());
    throw InputError(detail::concat("hf:", spec, ": no Parquet file of split '", split, "'",
                                    subset.empty() ? "" : " in subset '" + subset + "'", " in ", snapshot->string(),
                                    " (its Parquet files: ", join(seen, 8),
                                    "); name the split as hf:", name, ":SPLIT"));
  }
  return files;
}

}  // namespace ferry::io
