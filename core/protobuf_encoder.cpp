// Protobuf wire-format primitives (https://protobuf.dev/programming-guides/encoding/).
#include "core/protobuf_encoder.h"

#include <bit>
#include <cstring>

#include "core/error.h"

namespace ferry {
namespace {

void append_little_endian(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFFu));
}

}  // namespace

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80u) {
    out.push_back(static_cast<char>((value & 0x7Fu) | 0x80u));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void ProtobufEncoder::tag(int field, WireType type) {
  FERRY_CHECK(field >= 1 && field < (1 << 29), "protobuf field number out of range: ", field);
  append_varint(bytes_, (static_cast<uint64_t>(field) << 3) | static_cast<uint32_t>(type));
}

void ProtobufEncoder::varint_field(int field, uint64_t value) {
  tag(field, WireType::varint);
  append_varint(bytes_, value);
}

void ProtobufEncoder::double_field(int field, double value) {
  tag(field, WireType::fixed64);
  append_little_endian(bytes_, std::bit_cast<uint64_t>(value), 8);
}

void ProtobufEncoder::float_field(int field, float value) {
  tag(field, WireType::fixed32);
  append_little_endian(bytes_, std::bit_cast<uint32_t>(value), 4);
}

void ProtobufEncoder::bytes_field(int field, std::string_view bytes) {
  tag(field, WireType::length_delimited);
  append_varint(bytes_, bytes.size());
  bytes_.append(bytes);
}

}  // namespace ferry
