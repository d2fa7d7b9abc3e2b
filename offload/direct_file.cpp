// The NVMe tier's working file: creation checks, reservation and aligned IO (see direct_file.h).
#include "offload/direct_file.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/byte_size.h"
#include "core/error.h"

namespace ferry::offload {
namespace {

std::string where(const std::filesystem::path& folder) { return "offload.nvme_dir '" + folder.string() + "'"; }

void check_aligned(uint64_t offset, const void* buffer, uint64_t bytes) {
  FERRY_CHECK(offset % kDirectIoAlignment == 0 && bytes % kDirectIoAlignment == 0 &&
                  reinterpret_cast<uintptr_t>(buffer) % kDirectIoAlignment == 0,
              "unaligned direct IO: offset ", offset, ", ", bytes, " bytes");
}

}  // namespace

void AlignedFree::operator()(void* p) const { std::free(p); }

AlignedBuffer aligned_buffer(uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(round_up_to_alignment(bytes), kDirectIoAlignment);
  void* p = std::aligned_alloc(kDirectIoAlignment, size);
  if (p == nullptr) throw InternalError("out of host memory for an NVMe staging buffer of " + format_bytes_approx(size));
  std::memset(p, 0, size);
  return AlignedBuffer(static_cast<std::byte*>(p));
}

int64_t free_disk_bytes(const std::filesystem::path& folder) {
  struct statvfs info {};
  if (::statvfs(folder.c_str(), &info) != 0) return -1;
  return static_cast<int64_t>(info.f_bavail) * static_cast<int64_t>(info.f_frsize);
}

void check_nvme_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  if (std::filesystem::is_directory(folder, ec)) return;
  throw ConfigError(where(folder) + (std::filesystem::exists(folder, ec) ? " is not a folder" : " does not exist") +
                    ": create it (mkdir -p) on the NVMe drive, or set offload.optimizer_state_tier and "
                    "offload.params_tier to host");
}

DirectFile::DirectFile(const std::filesystem::path& folder, bool try_direct) : folder_(folder), direct_(try_direct) {
  check_nvme_folder(folder);
  static std::atomic<int> counter{0};
  const std::filesystem::path file =
      folder / ("ferry-nvme-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".state");
  constexpr int kFlags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  fd_ = try_direct ? ::open(file.c_str(), kFlags | O_DIRECT, 0600) : -1;
  if (!try_direct || (fd_ < 0 && errno == EINVAL)) {  // no O_DIRECT there: buffered, said by direct()
    direct_ = false;
    fd_ = ::open(file.c_str(), kFlags, 0600);
  }
  if (fd_ < 0) {
    const int error = errno;
    throw ConfigError("cannot create the NVMe tier's working file in " + where(folder) + ": " + std::strerror(error) +
                      (error == EROFS || error == EACCES || error == EPERM
                           ? " (a read-only filesystem or no write permission): point offload.nvme_dir at a writable "
                             "folder on the NVMe drive"
                           : ""));
  }
  ::unlink(file.c_str());  // a working area: gone with the process, whatever way it ends
}

void DirectFile::reserve(uint64_t bytes) {
  FERRY_CHECK(bytes % kDirectIoAlignment == 0 && size_ == 0, "DirectFile::reserve(", bytes, ") unaligned or twice");
  if (bytes == 0) return;
  const int error = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes));
  if (error == 0) {
    size_ = bytes;
  } else {
    std::string message = "cannot reserve " + format_bytes_approx(bytes) + " for the optimizer state in " +
                          where(folder_) + ": " + std::strerror(error);
    if (error == ENOSPC || error == EDQUOT) {
      const int64_t free = free_disk_bytes(folder_);
      if (free >= 0) message += " (" + format_bytes_approx(static_cast<uint64_t>(free)) + " free there)";
      message += ": free disk space, point offload.nvme_dir at a larger drive, or keep less state there";
    }
    throw ConfigError(message);
  }
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DirectFile::transfer(bool write, uint64_t offset, void* buffer, uint64_t bytes) const {
  if (direct_) check_aligned(offset, buffer, bytes);
  FERRY_CHECK(offset + bytes <= size_, write ? "write" : "read", " past the NVMe working file's end");
  auto* at = static_cast<char*>(buffer);
  uint64_t done = 0;
  while (done < bytes) {
    const off_t position = static_cast<off_t>(offset + done);
    const ssize_t n = write ? ::pwrite(fd_, at + done, bytes - done, position) : ::pread(fd_, at + done, bytes - done, position);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw InputError(std::string(write ? "writing the optimizer state to " : "reading the optimizer state from ") +
                       where(folder_) + " failed: " +
                       (n < 0 ? std::strerror(errno) : write ? "nothing written" : "unexpected end of file") +
                       "; the checkpoints are not affected: resume from the last one");
    }
    done += static_cast<uint64_t>(n);
  }
}

void DirectFile::read(uint64_t offset, void* buffer, uint64_t bytes) const { transfer(false, offset, buffer, bytes); }

void DirectFile::write(uint64_t offset, const void* buffer, uint64_t bytes) const {
  transfer(true, offset, const_cast<void*>(buffer), bytes);  // pwrite only reads it
  // Buffered fallback: the written pages go to disk and leave the cache, so they do not pile up in
  // memory.
  if (!direct_) {
    ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
  }
}

}  // namespace ferry::offload
