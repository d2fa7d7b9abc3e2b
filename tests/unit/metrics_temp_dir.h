// A fresh temporary folder per test, removed afterwards; shared by the metrics tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/support/scratch_dir.h"

namespace ferry::test_support {

// <tmp>/<prefix>_<pid>_<test name>, empty at the start of the test.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  const auto dir = std::filesystem::temp_directory_path() /
                   (prefix + "_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  remove_tree(dir);
  return dir;
}

}  // namespace ferry::test_support
