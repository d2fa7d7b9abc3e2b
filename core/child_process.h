// A program Ferry runs beside itself (a reward command, an environment worker) and talks to in
// lines over pipes: started by /bin/sh -c COMMAND in its own process group, its stdin written and
// its stdout read without blocking (poll), the last few KiB of its stderr kept for error messages.
//
// Nothing is left behind: the destructor closes stdin (a well-behaved program exits on end of
// input), waits a moment, then kills the whole group. The child also gets SIGKILL when the thread
// that started it dies (Linux's parent-death signal), so start children from the main thread; and
// when a second SIGINT/SIGTERM kills Ferry at once (train/stop_signal), the signal handler kills
// every live group first (kill_child_process_groups).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ferry {

// The program could not be started (pipes, fork): names the command.
class ChildProcessError : public UserError {
 public:
  using UserError::UserError;
};

class ChildProcess {
 public:
  explicit ChildProcess(std::string command);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Queues bytes for the program's stdin (pump() writes them as the pipe takes them).
  void write(std::string_view bytes);
  // The next complete stdout line (without its newline), if one has arrived.
  bool pop_line(std::string& line);
  // Waits up to `timeout_ms` (0: not at all) for any of `children` to become readable or writable,
  // then reads and writes what each can without blocking. Children already stopped are skipped.
  static void pump(const std::vector<ChildProcess*>& children, int timeout_ms);
  void pump(int timeout_ms) { pump({this}, timeout_ms); }

  // True once stdout has closed (the program ended or closed it), stdin refused bytes, or the
  // program was stopped.
  bool broken() const { return stdout_closed_ || stdin_closed_ || pid_ <= 0; }
  bool stopped() const { return pid_ <= 0; }
  // Bytes queued for stdin and not yet written.
  size_t unwritten() const { return outgoing_.size() - written_; }
  // "it exited with status 3", "it was killed by signal 9", ... (waits up to 1 s for the exit).
  std::string exit_description();
  // The last lines the program wrote to stderr (at most ~4 KiB), trimmed; empty if none.
  std::string stderr_tail() const;
  // Closes stdin, gives the program `grace_seconds` to exit, then kills its process group.
  void stop(double grace_seconds = 0.5);
  // Kills the process group at once and reaps it.
  void kill();

  const std::string& command() const { return command_; }
  pid_t pid() const { return pid_; }

 private:
  void read_available(int fd, bool is_stdout);
  void write_available();
  void close_pipes();
  bool reap(int* status);

  std::string command_;
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  std::string outgoing_;
  size_t written_ = 0;
  std::string incoming_;  // stdout bytes after the last complete line
  std::string errors_;    // the tail of stderr
  bool stdout_closed_ = false, stdin_closed_ = false;
  int exit_status_ = -1;  // waitpid status once reaped
};

// Sends SIGKILL to the process group of every live ChildProcess. Async-signal-safe: for signal
// handlers that end Ferry without running destructors.
void kill_child_process_groups();

}  // namespace ferry
