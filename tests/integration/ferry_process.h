// Running the `ferry` executable (or any shell command) from integration tests: the exit code and
// everything it printed, as a user would see it. Header-only; shared by tests/integration/*.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ferry_test {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout, and stderr unless left out
};

inline CommandResult run_command(const std::string& command_line, bool with_stderr = true) {
  const std::string command = command_line + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// `ferry ARGS`, run from the source tree (so configs/ and data/ paths work as in the README).
inline CommandResult run_ferry(const std::string& args) {
  return run_command(std::string("cd '") + FERRY_SOURCE_DIR + "' && '" + FERRY_BINARY + "' " + args);
}

}  // namespace ferry_test

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in:\n" << (haystack)
