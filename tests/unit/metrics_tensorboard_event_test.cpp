// Protobuf varints, Event encoding checked byte for byte (expected bytes worked out by hand from
// the wire format and confirmed with the Python protobuf classes that ship with tensorboard), and
// TFRecord framing including detection of damaged files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "core/protobuf_encoder.h"
#include "src/metrics/tensorboard_event.h"
#include "src/metrics/tensorboard_writer.h"
#include "src/metrics/tfrecord.h"
#include "tests/unit/metrics_temp_dir.h"

namespace ferry {
namespace {

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string varint(uint64_t value) {
  std::string out;
  append_varint(out, value);
  return hex(out);
}

TEST(MetricsProtobuf, Varints) {
  EXPECT_EQ(varint(0), "00");
  EXPECT_EQ(varint(1), "01");
  EXPECT_EQ(varint(127), "7f");
  EXPECT_EQ(varint(128), "8001");
  EXPECT_EQ(varint(300), "ac02");  // the protobuf documentation's example
  EXPECT_EQ(varint(16384), "808001");
  EXPECT_EQ(varint(UINT64_MAX), "ffffffffffffffffff01");
}

TEST(MetricsProtobuf, FieldsAndWireTypes) {
  ProtobufEncoder m;
  m.int64_field(2, -1);        // tag 0x10, ten-byte two's complement
  m.float_field(2, 0.5f);      // tag 0x15, 0x3f000000 little-endian
  m.double_field(1, 1.5);      // tag 0x09, 0x3ff8000000000000 little-endian
  m.bytes_field(3, "ab");      // tag 0x1a, length 2
  m.varint_field(16, 1);       // field 16 needs a two-byte tag: (16 << 3) | 0 = 128
  EXPECT_EQ(hex(m.bytes()),
            "10ffffffffffffffffff01"
            "150000003f"
            "09000000000000f83f"
            "1a026162"
            "800101");
}

// Event{wall_time: 1.5, step: 300, summary{value{tag: "loss", simple_value: 0.5}}}
//   09 <1.5 as double LE>   10 ac02   2a 0d [ 0a 0b [ 0a 04 "loss"  15 <0.5f LE> ] ]
TEST(MetricsTensorBoardEvent, ScalarEventBytes) {
  EXPECT_EQ(hex(encode_scalars_event(1.5, 300, {{"loss", 0.5}})),
            "09000000000000f83f" "10ac02" "2a0d" "0a0b" "0a046c6f7373" "150000003f");
}

TEST(MetricsTensorBoardEvent, SeveralValuesAreRepeatedFields) {
  EXPECT_EQ(hex(encode_scalars_event(1.5, 1, {{"a", 1.0}, {"b", -2.0}})),
            "09000000000000f83f" "1001" "2a14" "0a08" "0a0161" "150000803f" "0a08" "0a0162" "15000000c0");
}

TEST(MetricsTensorBoardEvent, FileVersionEventBytes) {
  EXPECT_EQ(hex(encode_file_version_event(1.5)), "09000000000000f83f" "1a0d" + hex("brain.Event:2"));
}

TEST(MetricsTensorBoardEvent, SessionStartEventBytes) {
  // session_log is Event field 7; SessionLog.status START = 1.
  EXPECT_EQ(hex(encode_session_start_event(1.5, 7)), "09000000000000f83f" "1007" "3a020801");
}

// A 3-byte record: length 3 (LE) | masked CRC of the length | "abc" | masked CRC of "abc".
// CRC-32C("abc") = 0x364b3fb7 (software reference), masked by ((c >> 15) | (c << 17)) + 0xa282ead8.
TEST(MetricsTfRecord, FramingLayout) {
  const std::string record = frame_tfrecord("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(hex(record.substr(0, 8)), "0300000000000000");
  EXPECT_EQ(record.substr(12, 3), "abc");
  const uint32_t crc = 0x364b3fb7u;
  const uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) stored = (stored << 8) | static_cast<unsigned char>(record[15 + i]);
  EXPECT_EQ(stored, masked);
}

TEST(MetricsTfRecord, ParsesWhatItFrames) {
  const std::string bytes = frame_tfrecord("first") + frame_tfrecord("") + frame_tfrecord(std::string(1000, 'x'));
  const auto records = parse_tfrecords(bytes, "mem");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], "first");
  EXPECT_EQ(records[1], "");
  EXPECT_EQ(records[2], std::string(1000, 'x'));
}

TEST(MetricsTfRecord, DetectsCorruption) {
  const std::string good = frame_tfrecord("hello") + frame_tfrecord("world");
  std::string flipped_data = good;
  flipped_data[12] ^= 0x01;  // first data byte of record 0
  EXPECT_THROW(parse_tfrecords(flipped_data, "mem"), InputError);
  std::string flipped_length_crc = good;
  flipped_length_crc[8] ^= 0x40;
  EXPECT_THROW(parse_tfrecords(flipped_length_crc, "mem"), InputError);
  std::string flipped_data_crc = good;
  flipped_data_crc[good.size() - 1] ^= 0x80;  // last byte of record 1's data CRC
  EXPECT_THROW(parse_tfrecords(flipped_data_crc, "mem"), InputError);
  EXPECT_THROW(parse_tfrecords(good.substr(0, good.size() - 2), "mem"), InputError);  // cut off
  try {
    parse_tfrecords(flipped_data_crc, "events.bin");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("events.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("record 1"), std::string::npos) << e.what();
  }
}

class MetricsTensorBoardWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_support::fresh_test_dir("ferry_tb_writer_test");
  }
  void TearDown() override { test_support::remove_tree(dir_); }
  std::filesystem::path dir_;
};

TEST_F(MetricsTensorBoardWriterTest, WritesVersionThenEventsReadableWhileOpen) {
  double now = 1700000000.25;
  TensorBoardWriter writer(dir_ / "tb", [&] { return now; });
  EXPECT_EQ(writer.path().parent_path(), dir_ / "tb");
  EXPECT_TRUE(writer.path().filename().string().starts_with("events.out.tfevents.1700000000."))
      << writer.path();
  now += 1.0;
  writer.write_scalars(5, {{"train/loss", 2.5}});
  // No close yet: the records are already in the file (live TensorBoard).
  const auto records = read_tfrecord_file(writer.path());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], encode_file_version_event(1700000000.25));
  EXPECT_EQ(records[1], encode_scalars_event(1700000001.25, 5, {{"train/loss", 2.5}}));
  writer.close();
  writer.close();  // twice is fine
}

TEST_F(MetricsTensorBoardWriterTest, TwoWritersInOneSecondGetDifferentFiles) {
  TensorBoardWriter first(dir_, [] { return 1700000000.0; });
  TensorBoardWriter second(dir_, [] { return 1700000000.0; });
  EXPECT_NE(first.path(), second.path());
  EXPECT_LT(first.path().filename(), second.path().filename());  // later file sorts later
}

}  // namespace
}  // namespace ferry
