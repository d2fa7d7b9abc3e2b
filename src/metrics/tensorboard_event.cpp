// Event / Summary / SessionLog encoding; field numbers from tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto.
#include "src/metrics/tensorboard_event.h"

#include "core/protobuf_encoder.h"

namespace ferry {
namespace {

namespace event_field {
constexpr int wall_time = 1;
constexpr int step = 2;
constexpr int file_version = 3;
constexpr int summary = 5;
constexpr int session_log = 7;
}  // namespace event_field

constexpr int kSummaryValueField = 1;
constexpr int kValueTagField = 1;
constexpr int kValueSimpleValueField = 2;
constexpr int kSessionLogStatusField = 1;
constexpr uint64_t kSessionLogStart = 1;

ProtobufEncoder event_header(double wall_time, int64_t step) {
  ProtobufEncoder event;
  event.double_field(event_field::wall_time, wall_time);
  // proto3 omits fields at their default value; readers treat a missing step as 0.
  if (step != 0) event.int64_field(event_field::step, step);
  return event;
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  ProtobufEncoder event = event_header(wall_time, 0);
  event.bytes_field(event_field::file_version, kTensorBoardFileVersion);
  return event.take();
}

std::string encode_scalars_event(double wall_time, int64_t step, const MetricValues& values) {
  ProtobufEncoder summary;
  for (const auto& v : values) {
    ProtobufEncoder value;
    value.bytes_field(kValueTagField, v.name);
    value.float_field(kValueSimpleValueField, static_cast<float>(v.value));
    summary.message_field(kSummaryValueField, value);
  }
  ProtobufEncoder event = event_header(wall_time, step);
  event.message_field(event_field::summary, summary);
  return event.take();
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  ProtobufEncoder session_log;
  session_log.varint_field(kSessionLogStatusField, kSessionLogStart);
  ProtobufEncoder event = event_header(wall_time, step);
  event.message_field(event_field::session_log, session_log);
  return event.take();
}

}  // namespace ferry
