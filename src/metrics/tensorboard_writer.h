// Writes a TensorBoard event file: scalars per step, readable live while training runs.
//
// Each writer creates a new file `<dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>`
// (n makes the name unique when two writers start in the same second) starting with the
// file-version record. Every record goes straight to the file with one write(), so TensorBoard sees
// progress as it happens and a crash loses at most the record being written. Point TensorBoard at
// the folder (`tensorboard --logdir <output.dir>/tb`); a resumed run adds a new file there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "src/metrics/metrics_clock.h"
#include "src/metrics/metrics_row.h"

namespace ferry {

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and a new event file in it. Throws InputError when it cannot.
  explicit TensorBoardWriter(const std::filesystem::path& dir, SecondsClock wall_clock = unix_time_seconds);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event with a scalar per value; tags are the value names (use "train/loss"-style names).
  void write_scalars(int64_t step, const MetricValues& values);

  // Marks a (re)start at `step`: TensorBoard drops older files' events with step >= `step`.
  void write_session_start(int64_t step);

  // Closes the file; later writes are bugs. Safe to call twice.
  void close();

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::filesystem::path path_;
  SecondsClock wall_clock_;
  int fd_ = -1;
};

}  // namespace ferry
