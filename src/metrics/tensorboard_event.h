// TensorBoard's Event protobuf, hand-encoded (no protobuf library). The subset Ferry writes:
//   Event      { double wall_time = 1; int64 step = 2; oneof { string file_version = 3;
//                Summary summary = 5; SessionLog session_log = 7; } }
//   Summary    { repeated Value value = 1; }
//   Value      { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   // START = 1
// Each encoded Event becomes one TFRecord (tfrecord.h) in an events.out.tfevents.* file.
#pragma once

#include <cstdint>
#include <string>

#include "src/metrics/metrics_row.h"

namespace ferry {

// The first record of every event file; "brain.Event:2" tells readers to honour SessionLog START.
inline constexpr const char* kTensorBoardFileVersion = "brain.Event:2";
std::string encode_file_version_event(double wall_time);

// One Event holding a scalar per value (tag = value name, stored as float32 like TensorBoard does).
std::string encode_scalars_event(double wall_time, int64_t step, const MetricValues& values);

// SessionLog START at `step`: TensorBoard then drops events with step >= `step` that earlier files
// hold, so a run resumed from a checkpoint does not show the crashed run's steps twice.
std::string encode_session_start_event(double wall_time, int64_t step);

}  // namespace ferry
