// Atomic checkpoint folders, listing, pruning and resume resolution.
#include "src/train/checkpoint_folders.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "src/core/error.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

constexpr std::string_view kTempMarker = ".tmp-";

bool is_temporary(const std::string& name) { return name.find(kTempMarker) != std::string::npos; }

std::optional<int64_t> step_of(const std::string& name) {
  if (!name.starts_with("step-") || is_temporary(name)) return std::nullopt;
  int64_t step = 0;
  const char* begin = name.data() + 5;
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return step;
}

}  // namespace

void write_folder_atomic(const fs::path& target, const std::function<void(const fs::path&)>& write) {
  const fs::path parent = target.parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  const std::string suffix = std::string(kTempMarker) + std::to_string(::getpid());
  const fs::path temp = parent / ("." + target.filename().string() + suffix);
  const fs::path old = parent / ("." + target.filename().string() + ".old" + suffix);
  fs::remove_all(temp);
  fs::create_directories(temp);
  try {
    write(temp);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    throw;
  }
  // Replace: move the old folder aside, move the new one in, then delete the old one. A crash
  // between the two renames leaves the old folder under its .old name and no `target`; the
  // previous step-N checkpoints are still there to resume from.
  const bool replacing = fs::exists(target);
  if (replacing) fs::rename(target, old);
  fs::rename(temp, target);
  if (replacing) fs::remove_all(old);
}

fs::path checkpoint_folder(const fs::path& output_dir, int64_t step) {
  return output_dir / ("step-" + std::to_string(step));
}

std::vector<int64_t> list_checkpoints(const fs::path& output_dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return steps;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    if (!entry.is_directory()) continue;
    if (auto step = step_of(entry.path().filename().string())) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void prune_checkpoints(const fs::path& output_dir, int64_t keep_last) {
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.starts_with(".") && is_temporary(name)) fs::remove_all(entry.path(), ec);
  }
  if (keep_last <= 0) return;
  const auto steps = list_checkpoints(output_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    fs::remove_all(checkpoint_folder(output_dir, steps[i]));
  }
}

std::optional<fs::path> resolve_resume(const fs::path& output_dir, const std::string& resume) {
  if (resume.empty()) return std::nullopt;
  if (resume == "auto") {
    const auto steps = list_checkpoints(output_dir);
    if (steps.empty()) return std::nullopt;
    return checkpoint_folder(output_dir, steps.back());
  }
  const fs::path path(resume);
  if (!fs::is_directory(path)) {
    throw InputError("train.resume: checkpoint folder '" + resume +
                     "' does not exist (use `auto` for the newest checkpoint in output.dir)");
  }
  if (is_temporary(path.filename().string())) {
    throw InputError("train.resume: '" + resume + "' is an incomplete checkpoint left by an interrupted save");
  }
  return path;
}

}  // namespace ferry
