// Scratch folders for test processes, <system temp>/<prefix>_<pid>, removed when the process exits
// so that runs of the suite leave nothing behind (CTest points TMPDIR at build/tests/tmp, and
// scripts/test.sh fails a run whose tests left files there). Set FERRY_KEEP_TEST_FILES=1 to keep
// them. Header-only and torch-free: shared by the unit, integration and fuzz tests.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace ferry::test_support {

// Removes a folder tree by hand: libtorch.so exports its own std::filesystem::remove_all, which
// tests linked against libtorch would pick up and which crashes.
inline void remove_tree(const std::filesystem::path& root) {
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root, ec)) paths.push_back(entry.path());
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) std::filesystem::remove(*it, ec);
  std::filesystem::remove(root, ec);
}

// The folders to remove when the process exits; `keep` (e.g. "a test failed") spares them.
class RemovedAtExit {
 public:
  static RemovedAtExit& instance() {
    static RemovedAtExit folders;
    return folders;
  }
  void add(const std::filesystem::path& dir, std::function<bool()> keep) {
    for (const auto& [known, unused] : dirs_)
      if (known == dir) return;
    dirs_.emplace_back(dir, std::move(keep));
  }
  RemovedAtExit(const RemovedAtExit&) = delete;
  RemovedAtExit& operator=(const RemovedAtExit&) = delete;
  ~RemovedAtExit() {
    if (std::getenv("FERRY_KEEP_TEST_FILES") != nullptr) return;
    for (const auto& [dir, keep] : dirs_)
      if (!keep || !keep()) remove_tree(dir);
  }

 private:
  RemovedAtExit() = default;
  std::vector<std::pair<std::filesystem::path, std::function<bool()>>> dirs_;
};

// <system temp>/<prefix>_<pid>, removed at exit unless `keep()` then says true. The caller creates
// or empties it.
inline std::filesystem::path process_scratch_dir(const std::string& prefix, std::function<bool()> keep = {}) {
  const auto dir = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()));
  RemovedAtExit::instance().add(dir, std::move(keep));
  return dir;
}

}  // namespace ferry::test_support
