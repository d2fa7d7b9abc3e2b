// Just enough of the protobuf wire format to write TensorBoard's Event messages and SentencePiece
// models by hand, so Ferry needs no protobuf library: varints, fixed 32/64-bit numbers and
// length-delimited fields.
// Fields are appended in the order the caller writes them (ascending field numbers by convention).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry {

// Appends `value` as a base-128 varint (7 bits per byte, low group first, high bit = "more").
void append_varint(std::string& out, uint64_t value);

// Builds one message's bytes. Nested messages are built with their own encoder and written with
// message_field(), which prefixes their length.
class ProtobufEncoder {
 public:
  void varint_field(int field, uint64_t value);
  // int64 fields use the plain varint of the two's-complement value (10 bytes when negative).
  void int64_field(int field, int64_t value) { varint_field(field, static_cast<uint64_t>(value)); }
  void double_field(int field, double value);  // wire type 1: 8 bytes little-endian
  void float_field(int field, float value);    // wire type 5: 4 bytes little-endian
  void bytes_field(int field, std::string_view bytes);  // wire type 2; also strings
  void message_field(int field, const ProtobufEncoder& message) { bytes_field(field, message.bytes()); }

  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }

 private:
  enum class WireType : uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };
  void tag(int field, WireType type);

  std::string bytes_;
};

}  // namespace ferry
