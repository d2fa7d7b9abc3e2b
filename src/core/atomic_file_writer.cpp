// Temporary sibling + fsync + rename, streamed (see atomic_file_writer.h).
#include "src/io/atomic_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "src/core/error.h"
#include "src/core/file_util.h"

namespace ferry::io {

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  temporary_ = temporary_sibling(path_);
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError("cannot write '" + temporary_.string() + "': " + std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
  }
}

void AtomicFileWriter::write(const void* data, size_t size) {
  FERRY_CHECK(fd_ >= 0, "write after commit");
  // Bounded writes: some kernels cap a single write() near 2 GiB anyway.
  constexpr size_t kMaxWrite = size_t{1} << 30;
  const auto* bytes = static_cast<const char*>(data);
  size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd_, bytes + written, std::min(size - written, kMaxWrite));
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      discard();
      throw InputError("cannot write '" + path_.string() + "': " + why);
    }
    written += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  FERRY_CHECK(fd_ >= 0, "commit called twice");
  if (::fsync(fd_) != 0) {
    const std::string why = std::strerror(errno);
    discard();
    throw InputError("cannot flush '" + path_.string() + "': " + why);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
    throw InputError("cannot flush '" + path_.string() + "': " + why);
  }
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
    throw InputError("cannot rename '" + temporary_.string() + "' to '" + path_.string() + "': " + ec.message());
  }
}

}  // namespace ferry::io
