// A child program over pipes (see child_process.h).
#include "core/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/text.h"

namespace ferry {
namespace {

constexpr size_t kStderrTail = 4096;

// Process groups of live children, for kill_child_process_groups (0: free slot). A fixed array of
// atomics: a signal handler may read it while the main thread adds or removes one.
std::array<std::atomic<pid_t>, 256> g_groups{};

void remember_group(pid_t pid) {
  for (auto& slot : g_groups) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pid)) return;
  }  // more than 256 live children: the rest are still killed by their destructors
}

void forget_group(pid_t pid) {
  for (auto& slot : g_groups) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

void kill_child_process_groups() {
  for (auto& slot : g_groups) {
    const pid_t pid = slot.load();
    if (pid > 0) ::kill(-pid, SIGKILL);
  }
}

ChildProcess::ChildProcess(std::string command) : command_(std::move(command)) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead child shows as EPIPE on write, not as a killed ferry
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
    throw ChildProcessError("`" + command_ + "`: cannot create pipes: " + std::strerror(e));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execl("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const int fork_error = errno;
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
  if (pid < 0) {
    close_pipes();
    throw ChildProcessError("`" + command_ + "`: cannot start /bin/sh: " + std::strerror(fork_error));
  }
  ::setpgid(pid, pid);  // also from this side, so the group exists before anyone signals it
  pid_ = pid;
  remember_group(pid);
  set_nonblocking(stdin_);
  set_nonblocking(stdout_);
  set_nonblocking(stderr_);
}

ChildProcess::~ChildProcess() { stop(); }

void ChildProcess::close_pipes() {
  close_fd(stdin_);
  close_fd(stdout_);
  close_fd(stderr_);
}

void ChildProcess::write(std::string_view bytes) {
  if (written_ > 0 && written_ == outgoing_.size()) {
    outgoing_.clear();
    written_ = 0;
  }
  outgoing_.append(bytes);
}

bool ChildProcess::pop_line(std::string& line) {
  const size_t newline = incoming_.find('\n');
  if (newline == std::string::npos) return false;
  line = incoming_.substr(0, newline);
  incoming_.erase(0, newline + 1);
  return true;
}

void ChildProcess::read_available(int fd, bool is_stdout) {
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      if (is_stdout) {
        incoming_.append(buffer, static_cast<size_t>(n));
      } else {
        errors_.append(buffer, static_cast<size_t>(n));
        if (errors_.size() > 2 * kStderrTail) errors_.erase(0, errors_.size() - kStderrTail);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // End of file, or an error reading: the program closed it.
    if (is_stdout) {
      stdout_closed_ = true;
      close_fd(stdout_);
    } else {
      close_fd(stderr_);
    }
    return;
  }
}

void ChildProcess::write_available() {
  while (stdin_ >= 0 && written_ < outgoing_.size()) {
    const ssize_t n = ::write(stdin_, outgoing_.data() + written_, outgoing_.size() - written_);
    if (n > 0) {
      written_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    stdin_closed_ = true;  // EPIPE: it stopped reading
    close_fd(stdin_);
    return;
  }
}

void ChildProcess::pump(const std::vector<ChildProcess*>& children, int timeout_ms) {
  std::vector<pollfd> fds;
  struct Slot {
    ChildProcess* child;
    int fd;
    enum { out, err, in } kind;
  };
  std::vector<Slot> slots;
  for (ChildProcess* c : children) {
    if (c->stdout_ >= 0) {
      fds.push_back({c->stdout_, POLLIN, 0});
      slots.push_back({c, c->stdout_, Slot::out});
    }
    if (c->stderr_ >= 0) {
      fds.push_back({c->stderr_, POLLIN, 0});
      slots.push_back({c, c->stderr_, Slot::err});
    }
    if (c->stdin_ >= 0 && c->written_ < c->outgoing_.size()) {
      fds.push_back({c->stdin_, POLLOUT, 0});
      slots.push_back({c, c->stdin_, Slot::in});
    }
  }
  if (fds.empty()) {
    if (timeout_ms > 0) ::poll(nullptr, 0, timeout_ms);
    return;
  }
  const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
  if (ready <= 0) return;  // time-out, or EINTR: the caller loops
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Slot& s = slots[i];
    switch (s.kind) {
      case Slot::out: s.child->read_available(s.fd, true); break;
      case Slot::err: s.child->read_available(s.fd, false); break;
      case Slot::in: s.child->write_available(); break;
    }
  }
}

bool ChildProcess::reap(int* status) {
  if (pid_ <= 0) return true;
  siginfo_t info{};
  // WNOWAIT: look without reaping, so the group id stays reserved while what the program started
  // in its group (still running, maybe) is killed.
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno != ECHILD) return false;
  } else if (info.si_pid != pid_) {
    return false;  // still running
  }
  ::kill(-pid_, SIGKILL);
  ::waitpid(pid_, status, 0);
  forget_group(pid_);
  pid_ = -1;
  return true;
}

std::string ChildProcess::exit_description() {
  if (pid_ > 0) {
    int status = 0;
    for (int i = 0; i < 100; ++i) {  // it closed stdout; give it a moment to exit
      if (reap(&status)) {
        exit_status_ = status;
        break;
      }
      ::usleep(10000);
    }
  }
  if (pid_ > 0) return "it closed its standard output";
  if (exit_status_ < 0) return "it is not running";
  if (WIFEXITED(exit_status_)) return "it exited with status " + std::to_string(WEXITSTATUS(exit_status_));
  if (WIFSIGNALED(exit_status_)) return "it was killed by signal " + std::to_string(WTERMSIG(exit_status_));
  return "it stopped";
}

std::string ChildProcess::stderr_tail() const {
  std::string tail = errors_.size() > kStderrTail ? errors_.substr(errors_.size() - kStderrTail) : errors_;
  return trim(tail);
}

void ChildProcess::kill() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_status_ = status;
    forget_group(pid_);
    pid_ = -1;
  }
  close_pipes();
}

void ChildProcess::stop(double grace_seconds) {
  close_fd(stdin_);  // end of input: a well-behaved program exits
  if (pid_ > 0) {
    const int rounds = static_cast<int>(grace_seconds * 100);
    for (int i = 0; i < rounds; ++i) {
      int status = 0;
      if (reap(&status)) {
        exit_status_ = status;
        break;
      }
      if (stderr_ >= 0) read_available(stderr_, false);
      ::usleep(10000);
    }
  }
  kill();
}

}  // namespace ferry
