// DirectFile: the NVMe tier's working file (offload.nvme_dir): created under the folder, unlinked at
// once (it lives as long as the process holds it open, so a crash leaves nothing behind: it is a
// working area, never a checkpoint), its whole size reserved up front (fallocate), and read and
// written at aligned offsets with O_DIRECT so the bytes bypass the page cache and the process's
// memory stays its own staging buffers. A filesystem without O_DIRECT (tmpfs, some network
// filesystems) falls back to buffered IO, said once by direct() and the engine's log; the pages
// are then dropped from the cache after each write (posix_fadvise). Torch-free.
//
// Errors (ConfigError, naming offload.nvme_dir and what to do): the folder missing or not a folder,
// not writable (read-only filesystem, permissions), too little free space for the reservation.
// A read or write that fails later is an InputError naming the folder and errno's text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace ferry::offload {

// Offsets, sizes and buffer addresses of direct IO are multiples of this.
inline constexpr uint64_t kDirectIoAlignment = 4096;

inline uint64_t round_up_to_alignment(uint64_t bytes) {
  return (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
}

// A ConfigError naming offload.nvme_dir unless `folder` is an existing folder.
void check_nvme_folder(const std::filesystem::path& folder);

// Zeroed memory aligned to kDirectIoAlignment.
struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;
AlignedBuffer aligned_buffer(uint64_t bytes);

class DirectFile {
 public:
  // Creates the (empty) file in `folder`. With `try_direct` false it takes the buffered path at
  // once (what a filesystem without O_DIRECT gets).
  explicit DirectFile(const std::filesystem::path& folder, bool try_direct = true);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  // Reserves the file's whole size (a multiple of kDirectIoAlignment), once.
  void reserve(uint64_t bytes);

  bool direct() const { return direct_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& folder() const { return folder_; }

  // Whole transfers (retried on short counts); aligned offset, size and buffer. Thread-safe.
  void read(uint64_t offset, void* buffer, uint64_t bytes) const;
  void write(uint64_t offset, const void* buffer, uint64_t bytes) const;

 private:
  void transfer(bool write, uint64_t offset, void* buffer, uint64_t bytes) const;

  std::filesystem::path folder_;
  int fd_ = -1;
  bool direct_ = true;
  uint64_t size_ = 0;
};

// Free bytes of the filesystem holding `folder` for an unprivileged writer, or -1 if unknown.
int64_t free_disk_bytes(const std::filesystem::path& folder);

}  // namespace ferry::offload
