// SIGINT / SIGTERM handling for training: the first signal asks the loop to stop after the current
// step and save a checkpoint; a second one restores the default action (kill immediately).
#pragma once

namespace ferry {

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
};

}  // namespace ferry
