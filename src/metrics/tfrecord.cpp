// TFRecord framing and a checking reader.
#include "src/metrics/tfrecord.h"

#include <cstdint>

#include "core/error.h"
#include "core/file_util.h"
#include "src/metrics/crc32c.h"

namespace ferry {
namespace {

constexpr size_t kLengthBytes = 8;
constexpr size_t kCrcBytes = 4;

void append_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

uint64_t load_le(std::string_view bytes, size_t offset, size_t count) {
  uint64_t value = 0;
  for (size_t i = count; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[offset + i]);
  return value;
}

}  // namespace

std::string frame_tfrecord(std::string_view data) {
  std::string out;
  out.reserve(kLengthBytes + 2 * kCrcBytes + data.size());
  append_le(out, data.size(), kLengthBytes);
  append_le(out, mask_crc32c(crc32c(std::string_view(out).substr(0, kLengthBytes))), kCrcBytes);
  out.append(data);
  append_le(out, mask_crc32c(crc32c(data)), kCrcBytes);
  return out;
}

std::vector<std::string> parse_tfrecords(std::string_view bytes, const std::string& source) {
  std::vector<std::string> records;
  size_t offset = 0;
  const auto fail = [&](const std::string& what) {
    throw InputError("'" + source + "' is not a valid TFRecord/event file: " + what + " at byte " +
                     std::to_string(offset) + " (record " + std::to_string(records.size()) +
                     "); the file is damaged or was cut off while being written");
  };
  while (offset < bytes.size()) {
    if (bytes.size() - offset < kLengthBytes + kCrcBytes) fail("truncated record header");
    const std::string_view length_bytes = bytes.substr(offset, kLengthBytes);
    const uint32_t length_crc = static_cast<uint32_t>(load_le(bytes, offset + kLengthBytes, kCrcBytes));
    if (mask_crc32c(crc32c(length_bytes)) != length_crc) fail("length checksum mismatch");
    const uint64_t length = load_le(bytes, offset, kLengthBytes);
    const size_t data_offset = offset + kLengthBytes + kCrcBytes;
    if (length > bytes.size() - data_offset || bytes.size() - data_offset - length < kCrcBytes) {
      fail("truncated record data");
    }
    const std::string_view data = bytes.substr(data_offset, length);
    const uint32_t data_crc = static_cast<uint32_t>(load_le(bytes, data_offset + length, kCrcBytes));
    if (mask_crc32c(crc32c(data)) != data_crc) fail("data checksum mismatch");
    records.emplace_back(data);
    offset = data_offset + length + kCrcBytes;
  }
  return records;
}

std::vector<std::string> read_tfrecord_file(const std::filesystem::path& path) {
  return parse_tfrecords(read_file(path), path.string());
}

}  // namespace ferry
