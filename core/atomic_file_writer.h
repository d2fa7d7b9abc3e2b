// Writes a file with crash safety: bytes go to a temporary sibling, which is fsynced and renamed
// into place by commit(), so a crash or kill never leaves a half-written file under the real name.
// Streams (checkpoints are too large to assemble in memory first); write_file_atomic
// (file_util.h) is the one-call form. A full disk is an InputError naming the file, the bytes it
// still needed and the bytes free there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "core/failpoint.h"

namespace ferry {

class AtomicFileWriter {
 public:
  // Creates parent folders and opens a temporary sibling of `path`. `expected_size` (0: unknown)
  // is the file's whole size, for the disk-full message. Throws InputError on failure.
  explicit AtomicFileWriter(std::filesystem::path path, uint64_t expected_size = 0);
  // Without commit(), the temporary file is removed and `path` is left untouched.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t size);
  // At a byte offset of the file (pwrite), for files whose parts are produced out of order; the
  // sequential position is not moved.
  void write_at(uint64_t offset, const void* data, size_t size);
  // fsync + rename onto the final name. Throws InputError naming the file on failure.
  void commit();

 private:
  void write_bytes(const void* data, size_t size, int64_t offset);  // offset < 0: sequential
  void discard() noexcept;
  [[noreturn]] void fail_write(int error, size_t left_in_this_write);

  std::filesystem::path path_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  uint64_t expected_size_ = 0;
  uint64_t written_ = 0;
  WriteFailure failpoint_ = WriteFailure::none;
};

}  // namespace ferry
