// MappedChunkFile: the parameter chunks' host copies on the NVMe tier (offload.params_tier nvme):
// one working file under offload.nvme_dir (created, reserved and unlinked as DirectFile does, so
// it is never a checkpoint and leaves nothing behind), mapped shared into the process, each chunk
// a page-aligned range of it. The engine reads and writes a chunk's host bytes as before (page-in
// copies, the CPU AdamW, checkpoints); the kernel pages them in from the drive on first touch.
// release(range) after each use starts the range's write-back and unmaps its pages from the
// process (MADV_DONTNEED on a shared file mapping keeps the data: dirty pages stay in the page
// cache until written), so the process's resident memory holds the chunks in use, not the model.
// The page cache holding released pages is the kernel's to reclaim. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "offload/direct_file.h"

namespace ferry::offload {

class MappedChunkFile {
 public:
  // A file of `bytes` (rounded up to the page size) in `folder`; ConfigErrors as DirectFile's.
  MappedChunkFile(const std::filesystem::path& folder, uint64_t bytes);
  ~MappedChunkFile();
  MappedChunkFile(const MappedChunkFile&) = delete;
  MappedChunkFile& operator=(const MappedChunkFile&) = delete;

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Starts writing [offset, offset + bytes) back and drops its pages from the process.
  void release(uint64_t offset, uint64_t bytes) const;

 private:
  std::unique_ptr<DirectFile> file_;  // buffered: the mapping goes through the page cache
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace ferry::offload
