// Checkpoint folders in output.dir: `step-N/` for each save and `final/` at the end. A folder is
// written under a temporary name and renamed into place, so a crash or kill mid-save never
// leaves a checkpoint that looks complete; older checkpoints stay untouched until the new one is
// in place, then output.keep_last prunes them. What goes inside is the caller's (model in
// Hugging Face format + trainer state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ferry {

// Fills a temporary sibling folder with `write`, then renames it to `target` (replacing an old
// `target` only after the new one is complete). If `write` throws, the temporary folder is removed
// and the exception propagates; `target` is unchanged.
void write_folder_atomic(const std::filesystem::path& target,
                         const std::function<void(const std::filesystem::path& folder)>& write);

std::filesystem::path checkpoint_folder(const std::filesystem::path& output_dir, int64_t step);

// Steps of the complete checkpoints in output_dir, ascending. Temporary folders left by a crash
// are ignored.
std::vector<int64_t> list_checkpoints(const std::filesystem::path& output_dir);

// Deletes all but the newest `keep_last` checkpoints (0 keeps all), and leftover temporary folders.
void prune_checkpoints(const std::filesystem::path& output_dir, int64_t keep_last);

// train.resume: "" -> none; "auto" -> the newest checkpoint in output_dir, or none; anything else
// is a checkpoint folder that must exist (InputError naming it otherwise).
std::optional<std::filesystem::path> resolve_resume(const std::filesystem::path& output_dir, const std::string& resume);

}  // namespace ferry
