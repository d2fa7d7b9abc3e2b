// Checkpoint folders in output.dir: `step-N/` for each save and `final/` at the end. A folder is
// written under a temporary name and renamed into place, so a crash or kill mid-save never
// leaves a checkpoint that looks complete; older checkpoints stay untouched until the new one is
// in place, then output.keep_last prunes them. A step-N folder ends with a manifest of its files
// and sizes, so one that is incomplete for another reason (a partial copy, a deleted file) is
// never resumed from by `auto`, which says why. What goes inside is the caller's (model in
// Hugging Face format + trainer state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
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

// The manifest a step-N checkpoint ends with: {"format", "version", "files": {relative path: bytes}}.
inline constexpr const char* kCheckpointManifestFile = "checkpoint_manifest.json";

// write_folder_atomic of checkpoint_folder(output_dir, step): `write` fills the folder, then the
// manifest of every file in it is written last.
void write_checkpoint_atomic(const std::filesystem::path& output_dir, int64_t step,
                             const std::function<void(const std::filesystem::path& folder)>& write);

// Why `folder` is not a complete checkpoint (no readable manifest, a file missing or of another
// size than the manifest says), or nullopt when it is complete.
std::optional<std::string> incomplete_checkpoint_reason(const std::filesystem::path& folder);

// Steps of the complete checkpoints in output_dir, ascending. Temporary folders left by a crash
// are ignored.
std::vector<int64_t> list_checkpoints(const std::filesystem::path& output_dir);

// Deletes all but the newest `keep_last` checkpoints (0 keeps all), and the temporary folders and
// files a killed run left in output_dir.
void prune_checkpoints(const std::filesystem::path& output_dir, int64_t keep_last);

// train.resume: "" -> none; "auto" -> the newest complete checkpoint in output_dir, or none (each
// newer, incomplete one is skipped with a line on `notes` saying why); anything else is a
// checkpoint folder that must exist and be complete (InputError naming it and why otherwise; one
// without a manifest, as saved before manifests existed, is taken with a note).
std::optional<std::filesystem::path> resolve_resume(const std::filesystem::path& output_dir, const std::string& resume,
                                                    std::ostream& notes);

}  // namespace ferry
