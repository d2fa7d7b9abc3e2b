// Running the `ferry` executable (or any shell command) from integration tests: the exit code and
// everything it printed, as a user would see it. Header-only; shared by tests/integration/*.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "tests/support/scratch_dir.h"

namespace ferry_test {

// --set flags for a quiet CPU run in a test: no progress bar, no TensorBoard files.
inline const std::string kQuietCpu =
    " --set train.device=cpu --set logging.progress=never --set logging.tensorboard=false";

// A folder of this test process's own: <system temp>/<prefix>_<pid>, removed when the process
// exits unless a test failed (kept to inspect).
inline std::filesystem::path process_temp_dir(const std::string& prefix) {
  return ferry::test_support::process_scratch_dir(prefix, [] { return ::testing::UnitTest::GetInstance()->Failed(); });
}

// A stage config for 3 steps of SFT of the demo-shaped model from scratch into dir/sft (what the
// RL tests start from), written to dir/sft.yaml; `eval_file`, when given, is evaluated too.
inline std::string quick_sft_stage(const std::filesystem::path& dir, const std::string& eval_file = "") {
  const std::filesystem::path path = dir / "sft.yaml";
  std::ofstream(path) << "stage: sft\nmodel: {config: configs/demo-model.json}\n"
                         "tokenizer: {path: data/tokenizer.model, chat_template: demo}\n"
                         "data: {train_file: data/sft_train.jsonl, "
                      << (eval_file.empty() ? "" : "eval_file: " + eval_file + ", ")
                      << "max_samples: 64, max_length: 64}\n"
                         "train: {micro_batch_size: 8, max_steps: 3, learning_rate: 1.0e-3}\n"
                         "output: {dir: "
                      << (dir / "sft").string() << "}\n";
  return path.string();
}

// The whole text of a file (empty when it cannot be read), e.g. a background run's log.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Writes `text` into dir/name and returns the file's path.
inline std::string write_text(const std::filesystem::path& dir, const std::string& name, const std::string& text) {
  const std::filesystem::path path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

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

// `ferry ARGS` with environment assignments ("NAME='value' ...") in front.
inline CommandResult run_ferry_with_env(const std::string& env, const std::string& args) {
  return run_command(std::string("cd '") + FERRY_SOURCE_DIR + "' && " + env + " '" + FERRY_BINARY + "' " + args);
}

// Lines of `file` that contain `needle` (0 when the file does not exist yet).
inline int count_lines_with(const std::string& file, const std::string& needle) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// `ferry ARGS` started in the background from the source tree, stdout and stderr into `log`.
// Returns the child's pid (negative when fork failed).
inline pid_t start_ferry(const std::string& args, const std::string& log) {
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string command =
        std::string("cd '") + FERRY_SOURCE_DIR + "' && exec '" + FERRY_BINARY + "' " + args + " > '" + log + "' 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return child;
}

// Sends `signal` to `child` and waits up to a minute for it to exit: its wait status, or nullopt
// when it did not stop (it is then killed).
inline std::optional<int> stop_ferry(pid_t child, int signal) {
  if (::kill(child, signal) != 0) return std::nullopt;
  int status = 0;
  for (int i = 0; i < 600; ++i) {
    if (::waitpid(child, &status, WNOHANG) == child) return status;
    ::usleep(100 * 1000);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return std::nullopt;
}

}  // namespace ferry_test

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in:\n" << (haystack)
