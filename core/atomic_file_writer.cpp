// Temporary sibling + fsync + rename, streamed (see atomic_file_writer.h).
#include "core/atomic_file_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/byte_size.h"
#include "core/error.h"
#include "core/file_util.h"

namespace ferry {
namespace {

// Free bytes for an unprivileged writer on the filesystem holding `folder`, or -1 if unknown.
int64_t free_bytes(const std::filesystem::path& folder) {
  struct statvfs info {};
  if (::statvfs(folder.empty() ? "." : folder.c_str(), &info) != 0) return -1;
  return static_cast<int64_t>(info.f_bavail) * static_cast<int64_t>(info.f_frsize);
}

std::string bytes_text(uint64_t bytes) {
  return std::to_string(bytes) + " bytes (" + format_bytes_approx(bytes) + ")";
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path, uint64_t expected_size)
    : path_(std::move(path)), expected_size_(expected_size) {
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  temporary_ = temporary_sibling(path_);
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError("cannot write '" + temporary_.string() + "': " + std::strerror(errno));
  failpoint_ = file_write_failpoint(path_);
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

void AtomicFileWriter::fail_write(int error, size_t left_in_this_write) {
  discard();  // frees what this file took before measuring what is free
  std::string message = "cannot write '" + path_.string() + "': " + std::strerror(error);
  if (error == ENOSPC || error == EDQUOT) {
    const uint64_t needed = std::max<uint64_t>(expected_size_ > written_ ? expected_size_ - written_ : 0,
                                               left_in_this_write);
    const int64_t free = free_bytes(path_.parent_path());
    message += " (the file still needed " + std::string(expected_size_ > 0 ? "" : "at least ") + bytes_text(needed);
    if (free >= 0) message += "; " + bytes_text(static_cast<uint64_t>(free)) + " free there now";
    message += "): free disk space or point the output elsewhere";
  }
  throw InputError(message);
}

void AtomicFileWriter::write(const void* data, size_t size) { write_bytes(data, size, -1); }

void AtomicFileWriter::write_at(uint64_t offset, const void* data, size_t size) {
  write_bytes(data, size, static_cast<int64_t>(offset));
}

void AtomicFileWriter::write_bytes(const void* data, size_t size, int64_t offset) {
  FERRY_CHECK(fd_ >= 0, "write after commit");
  const auto* bytes = static_cast<const char*>(data);
  size_t limit = size;  // what this call may write before an injected failure
  if (failpoint_ != WriteFailure::none) limit = size / 2;
  // Bounded writes: some kernels cap a single write() near 2 GiB anyway.
  constexpr size_t kMaxWrite = size_t{1} << 30;
  size_t done = 0;
  while (done < limit) {
    const size_t chunk = std::min(limit - done, kMaxWrite);
    const ssize_t n = offset < 0 ? ::write(fd_, bytes + done, chunk)
                                 : ::pwrite(fd_, bytes + done, chunk, static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_write(errno, size - done);
    }
    done += static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  if (failpoint_ == WriteFailure::kill) {
    ::fsync(fd_);
    std::fprintf(stderr, "ferry failpoint: killed while writing %s\n", temporary_.c_str());
    std::fflush(stderr);
    ::raise(SIGKILL);
  }
  if (failpoint_ == WriteFailure::no_space) fail_write(ENOSPC, size - done);
}

void AtomicFileWriter::commit() {
  FERRY_CHECK(fd_ >= 0, "commit called twice");
  if (::fsync(fd_) != 0) {
    const int error = errno;
    if (error == ENOSPC || error == EDQUOT) fail_write(error, 0);
    discard();
    throw InputError("cannot flush '" + path_.string() + "': " + std::strerror(error));
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

}  // namespace ferry
