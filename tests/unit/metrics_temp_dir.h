// A fresh temporary folder per test, removed afterwards; shared by the metrics tests.
// Removal walks the tree by hand: libtorch.so exports its own std::filesystem::remove_all, which
// the tests (linked against libtorch) would pick up and which crashes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace ferry::test_support {

inline void remove_tree(const std::filesystem::path& root) {
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root, ec)) paths.push_back(entry.path());
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) std::filesystem::remove(*it, ec);
  std::filesystem::remove(root, ec);
}

// <tmp>/<prefix>_<pid>_<test name>, empty at the start of the test.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  const auto dir = std::filesystem::temp_directory_path() /
                   (prefix + "_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  remove_tree(dir);
  return dir;
}

}  // namespace ferry::test_support
