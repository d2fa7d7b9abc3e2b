// File helpers with the error messages and crash safety Ferry promises: reads name the file
// that failed, writes go to a temporary name in the same folder and are renamed into place, so a
// crash never leaves a half-written file under the real name.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ferry {

// Whole file as bytes; throws InputError naming the path when it cannot be read.
std::string read_file(const std::filesystem::path& path);

// Writes `content` to `path` atomically (temp file + fsync + rename); creates parent folders.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// A unique temporary sibling name for `path` ("<name>.tmp-<pid>-<n>").
std::filesystem::path temporary_sibling(const std::filesystem::path& path);

}  // namespace ferry
