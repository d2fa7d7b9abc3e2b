// Starting and supervising the processes of a data-parallel run (see launcher.h).
#include "src/dist/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "core/error.h"

namespace ferry::dist {
namespace {

// The children, for the signal handler to forward to (one launch per process at a time).
std::atomic<pid_t> g_children[1024];
std::atomic<int> g_child_count{0};

void forward_signal(int signal_number) {
  for (int i = 0; i < g_child_count.load(); ++i) {
    const pid_t pid = g_children[i].load();
    if (pid > 0) ::kill(pid, signal_number);
  }
}

int exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return detail::concat("was killed by signal ", WTERMSIG(wait_status), " (", ::strsignal(WTERMSIG(wait_status)), ")");
  }
  return detail::concat("exited with code ", exit_status(wait_status));
}

}  // namespace

int64_t free_port(const std::string& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw UserError(std::string("ferry launch: cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &address.sin_addr) != 1) address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    throw UserError("ferry launch: cannot find a free port on " + addr + ": " + reason + "; pass --master-port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

int launch_processes(const LaunchOptions& options, std::ostream& log) {
  if (options.nproc < 1 || options.nproc > 1024) throw UserError("ferry launch: --nproc must be from 1 to 1024");
  if (options.args.empty()) throw UserError("ferry launch: nothing to run; e.g. ferry launch --nproc 2 -- train-sft --config F");
  const int64_t port = options.master_port > 0 ? options.master_port : free_port(options.master_addr);
  log << "ferry launch: " << options.nproc << " processes, rendezvous at " << options.master_addr << ":" << port
      << std::endl;
  // As torchrun does: N processes each with as many threads as the machine's cores would
  // oversubscribe it (2 processes on 2 cores ran PPO 2.7x slower), so each gets its share.
  const int64_t threads = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / options.nproc);
  const bool set_threads = options.nproc > 1 && std::getenv("OMP_NUM_THREADS") == nullptr;
  if (set_threads) {
    log << "ferry launch: OMP_NUM_THREADS=" << threads << " for each process (the cores shared among them; set "
        << "OMP_NUM_THREADS to choose)" << std::endl;
  }

  std::vector<std::string> argv_strings{options.executable};
  argv_strings.insert(argv_strings.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  struct sigaction forward {}, old_int {}, old_term {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);

  std::vector<pid_t> pids;
  g_child_count = 0;
  for (int64_t rank = 0; rank < options.nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      forward_signal(SIGTERM);
      throw UserError(std::string("ferry launch: fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      const auto set = [](const char* name, int64_t value) { ::setenv(name, std::to_string(value).c_str(), 1); };
      set("RANK", rank);
      set("WORLD_SIZE", options.nproc);
      set("LOCAL_RANK", rank);
      set("LOCAL_WORLD_SIZE", options.nproc);
      ::setenv("MASTER_ADDR", options.master_addr.c_str(), 1);
      set("MASTER_PORT", port);
      if (set_threads) set("OMP_NUM_THREADS", threads);
      ::execv(options.executable.c_str(), argv.data());
      std::fprintf(stderr, "ferry launch: cannot start %s: %s\n", options.executable.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
    g_children[rank] = pid;
    g_child_count = static_cast<int>(rank + 1);
  }

  // Wait for all; after the first failure, the others get grace_seconds before SIGTERM, then SIGKILL.
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  std::optional<int> first_failure;
  constexpr auto kNever = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point terminate_at = kNever, kill_at = kNever;
  while (remaining > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t rank = 0; rank < pids.size(); ++rank) {
        if (pids[rank] != pid || done[rank]) continue;
        done[rank] = true;
        g_children[rank] = 0;
        --remaining;
        const int code = exit_status(status);
        if (code != 0 && !first_failure) {
          first_failure = code;
          log << "ferry launch: rank " << rank << " " << describe(status);
          if (remaining > 0) {
            log << "; stopping the other " << remaining << " process(es) (they get " << options.grace_seconds
                << " s to stop on their own)";
            terminate_at = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(static_cast<int64_t>(options.grace_seconds * 1000));
          }
          log << std::endl;
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR && errno != ECHILD) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= terminate_at) {
      log << "ferry launch: terminating the processes still running" << std::endl;
      forward_signal(SIGTERM);
      terminate_at = kNever;
      kill_at = now + std::chrono::seconds(10);
    }
    if (now >= kill_at) {
      forward_signal(SIGKILL);
      kill_at = kNever;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  g_child_count = 0;
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return first_failure.value_or(0);
}

}  // namespace ferry::dist
