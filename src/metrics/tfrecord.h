// TFRecord framing, the container of TensorBoard event files. Each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   data | uint32 masked CRC-32C of data
// The reader checks both checksums; Ferry uses it in tests and to inspect its own event files.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

// One framed record, ready to append to a file.
std::string frame_tfrecord(std::string_view data);

// The records of a whole TFRecord byte string, checked. Throws InputError naming `source` (a file
// name for the message) and the byte offset when a checksum does not match or a record is cut off.
std::vector<std::string> parse_tfrecords(std::string_view bytes, const std::string& source);

// parse_tfrecords() on a file's contents.
std::vector<std::string> read_tfrecord_file(const std::filesystem::path& path);

}  // namespace ferry
