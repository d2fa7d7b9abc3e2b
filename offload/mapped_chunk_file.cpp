// The NVMe tier's mapped parameter chunks (see mapped_chunk_file.h).
#include "offload/mapped_chunk_file.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ferry::offload {

MappedChunkFile::MappedChunkFile(const std::filesystem::path& folder, uint64_t bytes)
    : file_(std::make_unique<DirectFile>(folder, /*try_direct=*/false)), size_(round_up_to_alignment(bytes)) {
  if (size_ == 0) return;
  file_->reserve(size_);
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, file_->fd(), 0);
  if (p == MAP_FAILED) {
    throw ConfigError("cannot map the parameters' working file in offload.nvme_dir '" + folder.string() +
                      "': " + std::strerror(errno));
  }
  data_ = static_cast<std::byte*>(p);
}

MappedChunkFile::~MappedChunkFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

void MappedChunkFile::release(uint64_t offset, uint64_t bytes) const {
  if (bytes == 0) return;
  FERRY_CHECK(offset % kDirectIoAlignment == 0 && offset + bytes <= size_, "release of an unaligned or foreign range");
  const uint64_t length = round_up_to_alignment(bytes);
  ::sync_file_range(file_->fd(), static_cast<off_t>(offset), static_cast<off_t>(length), SYNC_FILE_RANGE_WRITE);
  ::madvise(data_ + offset, length, MADV_DONTNEED);
}

}  // namespace ferry::offload
