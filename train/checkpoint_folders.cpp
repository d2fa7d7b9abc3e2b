// Atomic checkpoint folders, listing, pruning and resume resolution.
#include "train/checkpoint_folders.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <ostream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

constexpr std::string_view kTempMarker = ".tmp-";
constexpr const char* kManifestFormat = "ferry-checkpoint-manifest";
constexpr int kManifestVersion = 1;

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
  } catch (const InputError& e) {  // e.g. a full disk: say that nothing saved before was touched
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    const std::vector<int64_t> steps = list_checkpoints(parent);
    throw InputError(std::string(e.what()) + "\n'" + target.string() + "' was not saved; " +
                     (steps.empty() ? std::string("nothing saved before was changed")
                                    : "the checkpoints saved before are intact (newest: " +
                                          checkpoint_folder(parent, steps.back()).string() + ")"));
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
    // A file a killed process was writing ("config.yaml.tmp-<pid>-<n>"; AtomicFileWriter).
    if (entry.is_regular_file() && is_temporary(name)) fs::remove(entry.path(), ec);
  }
  if (keep_last <= 0) return;
  const auto steps = list_checkpoints(output_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    fs::remove_all(checkpoint_folder(output_dir, steps[i]));
  }
}

std::optional<fs::path> resolve_resume(const fs::path& output_dir, const std::string& resume, std::ostream& notes) {
  if (resume.empty()) return std::nullopt;
  if (resume == "auto") {
    const auto steps = list_checkpoints(output_dir);
    for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
      const fs::path folder = checkpoint_folder(output_dir, *step);
      const std::optional<std::string> why = incomplete_checkpoint_reason(folder);
      if (!why) return folder;
      notes << "train.resume=auto: skipping " << folder.string() << ", not a complete checkpoint: " << *why << "\n";
    }
    return std::nullopt;
  }
  const fs::path path(resume);
  if (!fs::is_directory(path)) {
    throw InputError("train.resume: checkpoint folder '" + resume +
                     "' does not exist (use `auto` for the newest checkpoint in output.dir)");
  }
  if (is_temporary(path.filename().string())) {
    throw InputError("train.resume: '" + resume + "' is an incomplete checkpoint left by an interrupted save");
  }
  if (!fs::exists(path / kCheckpointManifestFile)) {
    notes << "note: " << path.string() << " has no " << kCheckpointManifestFile
          << " (saved before checkpoints had one?); its files are not checked\n";
    return path;
  }
  if (const std::optional<std::string> why = incomplete_checkpoint_reason(path)) {
    throw InputError("train.resume: '" + resume + "' is not a complete checkpoint: " + *why +
                     " (resume from another step-N folder, or `auto` for the newest complete one)");
  }
  return path;
}

void write_checkpoint_atomic(const fs::path& output_dir, int64_t step,
                             const std::function<void(const fs::path& folder)>& write) {
  write_folder_atomic(checkpoint_folder(output_dir, step), [&](const fs::path& folder) {
    write(folder);
    nlohmann::ordered_json files = nlohmann::ordered_json::object();
    std::vector<std::pair<std::string, uintmax_t>> sizes;
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
      if (entry.is_regular_file()) sizes.emplace_back(entry.path().lexically_relative(folder).generic_string(), entry.file_size());
    }
    std::sort(sizes.begin(), sizes.end());
    for (const auto& [name, size] : sizes) files[name] = size;
    const nlohmann::ordered_json manifest{{"format", kManifestFormat}, {"version", kManifestVersion}, {"files", files}};
    write_file_atomic(folder / kCheckpointManifestFile, manifest.dump(2) + "\n");
  });
}

std::optional<std::string> incomplete_checkpoint_reason(const fs::path& folder) {
  const fs::path file = folder / kCheckpointManifestFile;
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::string("it has no ") + kCheckpointManifestFile + ", which a save writes last";
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(file));
  } catch (const std::exception& e) {
    return file.string() + " cannot be read: " + e.what();
  }
  if (!manifest.is_object() || manifest.value("format", "") != kManifestFormat || !manifest.contains("files") ||
      !manifest["files"].is_object()) {
    return file.string() + " is not a Ferry checkpoint manifest";
  }
  for (const auto& [name, size] : manifest["files"].items()) {
    const fs::path path = folder / name;
    if (!size.is_number_unsigned()) return file.string() + ": the size of '" + name + "' is not a number";
    if (!fs::is_regular_file(path, ec)) return "'" + name + "' is missing";
    const uintmax_t actual = fs::file_size(path, ec);
    if (ec || actual != size.get<uintmax_t>()) {
      return "'" + name + "' has " + std::to_string(actual) + " bytes, the manifest says " + size.dump();
    }
  }
  return std::nullopt;
}

}  // namespace ferry
