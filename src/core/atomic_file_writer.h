// Streams a large file to disk with the crash safety of write_file_atomic (src/core/file_util.h):
// bytes go to a temporary sibling, which is fsynced and renamed into place by commit(). Used for
// checkpoints, which are too large to assemble in memory first.
#pragma once

#include <cstddef>
#include <filesystem>

namespace ferry::io {

class AtomicFileWriter {
 public:
  // Creates parent folders and opens a temporary sibling of `path`. Throws InputError on failure.
  explicit AtomicFileWriter(std::filesystem::path path);
  // Without commit(), the temporary file is removed and `path` is left untouched.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t size);
  // fsync + rename onto the final name. Throws InputError naming the file on failure.
  void commit();

 private:
  void discard() noexcept;

  std::filesystem::path path_;
  std::filesystem::path temporary_;
  int fd_ = -1;
};

}  // namespace ferry::io
