// SIGINT / SIGTERM handling for training: the first signal asks the loop to stop after the current
// step and save a checkpoint; a second one restores the default action (kill immediately).
#pragma once

namespace ferry {

namespace dist {
class ShardGroup;
}

class StopSignal {
 public:
  // Installs the handlers for the lifetime of this object (restores the previous ones after).
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // True once SIGINT or SIGTERM has arrived.
  bool requested() const;
  // The signal number that arrived (0 if none).
  int signal_number() const;

  // Data parallelism: whether any process of `group` (null: this one alone) was asked to stop. A
  // collective: every process calls it at the same point, and all stop together.
  bool requested_by_any(dist::ShardGroup* group) const;
  // The signal a stop reports: this process's own, or SIGTERM when another process's stopped it.
  int reported_signal() const;
};

}  // namespace ferry
