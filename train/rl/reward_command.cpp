// The reward command process (see reward_command.h).
#include "train/rl/reward_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/text.h"

extern char** environ;

namespace ferry::rl {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A whole line that strtod reads completely, surrounding whitespace allowed.
bool parse_answer(const std::string& line, double& out) {
  const std::string text = trim(line);
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

std::string shorten(const std::string& text, size_t limit = 80) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

}  // namespace

RewardCommand::RewardCommand(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead child shows as EPIPE on write, not as a killed ferry
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw RewardCommandError("reward command `" + command_ + "`: cannot create pipes: " + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
  const int rc = posix_spawn(&pid_, "/bin/sh", &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  if (rc != 0) {
    pid_ = -1;
    stop();
    throw RewardCommandError("reward command `" + command_ + "`: cannot start /bin/sh: " + std::strerror(rc));
  }
  ::fcntl(to_child_, F_SETFL, ::fcntl(to_child_, F_GETFL) | O_NONBLOCK);
  ::fcntl(from_child_, F_SETFL, ::fcntl(from_child_, F_GETFL) | O_NONBLOCK);
}

RewardCommand::~RewardCommand() { stop(); }

void RewardCommand::stop() {
  close_fd(to_child_);  // end of input: a well-behaved program exits
  close_fd(from_child_);
  if (pid_ <= 0) return;
  for (int i = 0; i < 50; ++i) {  // up to 0.5 s to exit by itself
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    ::usleep(10000);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string RewardCommand::exit_description() {
  if (pid_ <= 0) return "it is not running";
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {  // it closed stdout; give it a moment to exit
    done = ::waitpid(pid_, &status, WNOHANG);
    if (done == 0) ::usleep(10000);
  }
  if (done != pid_) return "it closed its standard output";
  pid_ = -1;
  if (WIFEXITED(status)) return "it exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "it was killed by signal " + std::to_string(WTERMSIG(status));
  return "it stopped";
}

bool RewardCommand::exchange(const std::vector<std::string>& requests, std::vector<double>& answers,
                             std::string& failure, size_t& failed_at) {
  using Clock = std::chrono::steady_clock;
  answers.clear();
  if (requests.empty()) return true;
  if (pid_ <= 0 || to_child_ < 0) {
    failure = "the program is no longer running";
    return false;
  }
  std::string out;
  for (const std::string& r : requests) (out += r) += '\n';
  size_t written = 0;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
  while (answers.size() < requests.size()) {
    failed_at = answers.size();
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      double value = 0;
      if (!parse_answer(line, value)) {
        failure = "answered '" + shorten(line) + "', not a number; it must print one number per input line";
        stop();
        return false;
      }
      answers.push_back(value);
      deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
      continue;
    }
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {to_child_, POLLOUT, 0}};
    const nfds_t count = written < out.size() ? 2 : 1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      failure = "no answer within " + detail::concat(timeout_seconds_) + " s (rewards[].timeout); the program was stopped";
      stop();
      return false;
    }
    const int ready = ::poll(fds, count, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      failure = std::string("poll failed: ") + std::strerror(errno);
      stop();
      return false;
    }
    if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = ::write(to_child_, out.data() + written, out.size() - written);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        failure = "it stopped reading its input (" + exit_description() + ")";
        stop();
        return false;
      }
    }
    if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
      char buffer[4096];
      const ssize_t n = ::read(from_child_, buffer, sizeof(buffer));
      if (n > 0) {
        pending_.append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        failure = "it ended before answering (" + exit_description() + ")";
        stop();
        return false;
      } else if (errno != EAGAIN && errno != EINTR) {
        failure = std::string("reading its answers failed: ") + std::strerror(errno);
        stop();
        return false;
      }
    }
  }
  return true;
}

}  // namespace ferry::rl
