// Async-signal-safe stop flag.
#include "train/stop_signal.h"

#include <csignal>

#include "core/child_process.h"
#include "src/dist/shard_group.h"

namespace ferry {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_previous_int, g_previous_term;

void on_signal(int number) {
  if (g_signal != 0) {
    // Second signal: the user means it. Kill the programs Ferry started (environments, reward
    // commands), restore the default action and re-raise.
    kill_child_process_groups();
    std::signal(number, SIG_DFL);
    std::raise(number);
    return;
  }
  g_signal = number;
}

}  // namespace

StopSignal::StopSignal() {
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

bool StopSignal::requested() const { return g_signal != 0; }
int StopSignal::signal_number() const { return g_signal; }

bool StopSignal::requested_by_any(dist::ShardGroup* group) const {
  if (group == nullptr || group->size() == 1) return requested();
  return dist::sum_over_processes(*group, requested() ? 1.0 : 0.0) > 0;
}

int StopSignal::reported_signal() const { return requested() ? signal_number() : SIGTERM; }

}  // namespace ferry
