// ChildProcess (core/child_process.h): lines both ways, the stderr tail and exit description for
// error messages, and nothing left running: the whole process group dies with the object, and
// kill_child_process_groups (what the second-signal handler calls) kills every live group.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "core/child_process.h"

namespace ferry {
namespace {

// True while `pid` exists and is not a zombie.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

bool gone_within(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (!running(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !running(pid);
}

std::string next_line(ChildProcess& child, double seconds = 10) {
  std::string line;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!child.pop_line(line)) {
    if (child.broken() || std::chrono::steady_clock::now() > until) return "<none>";
    child.pump(50);
  }
  return line;
}

TEST(ChildProcess, LinesGoBothWaysInOrder) {
  ChildProcess cat("cat");
  cat.write("one\ntwo\n");
  EXPECT_EQ(next_line(cat), "one");
  EXPECT_EQ(next_line(cat), "two");
  cat.write(std::string(200000, 'x') + "\n");  // more than a pipe holds: written as it drains
  EXPECT_EQ(next_line(cat).size(), 200000u);
}

TEST(ChildProcess, ExitStatusAndStderrTailNameWhatWentWrong) {
  ChildProcess child("echo 'first line' >&2; echo 'it broke' >&2; exit 3");
  EXPECT_EQ(next_line(child), "<none>");
  EXPECT_TRUE(child.broken());
  EXPECT_EQ(child.exit_description(), "it exited with status 3");
  EXPECT_EQ(child.stderr_tail(), "first line\nit broke");
  ChildProcess killed("kill -9 $$");
  next_line(killed);
  EXPECT_EQ(killed.exit_description(), "it was killed by signal 9");
}

TEST(ChildProcess, TheWholeGroupDiesWithTheObject) {
  pid_t grandchild = 0;
  {
    ChildProcess child("sleep 300 & echo $!; wait");  // sh waits on a grandchild that ignores stdin
    grandchild = std::stoi(next_line(child));
    ASSERT_TRUE(running(grandchild));
  }
  EXPECT_TRUE(gone_within(grandchild, 5)) << "pid " << grandchild;
}

TEST(ChildProcess, KillChildProcessGroupsKillsEveryLiveOne) {
  ChildProcess a("sleep 300 & echo $!; wait"), b("sleep 300 & echo $!; wait");
  const pid_t ga = std::stoi(next_line(a)), gb = std::stoi(next_line(b));
  kill_child_process_groups();
  EXPECT_TRUE(gone_within(ga, 5));
  EXPECT_TRUE(gone_within(gb, 5));
  EXPECT_TRUE(gone_within(a.pid(), 5));
}

}  // namespace
}  // namespace ferry
