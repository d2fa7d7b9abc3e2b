// A read-only view of a whole file through mmap, shared by every tensor that points into it.
// Checkpoint readers validate the bytes first and then hand out zero-copy tensors; the mapping
// stays alive for as long as any of them (they hold a shared_ptr to it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace ferry::io {

class MappedFile {
 public:
  // Maps `path` privately: pages are shared with the page cache until someone writes to them,
  // then copied (copy-on-write), so an in-place edit of a view never reaches the file. Under
  // strict overcommit (vm.overcommit_memory=2) a writable private mapping is charged in full, so
  // when it is refused the file is mapped read-only instead (see writable()).
  // Throws InputError naming the path when it cannot be opened or mapped.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Start of the mapping (nullptr for an empty file). Writable only because torch tensors want a
  // mutable pointer; writes stay private to this process.
  std::byte* data() const { return data_; }
  // False for a read-only fallback mapping: writing through data() would fault, so readers must
  // hand out copies rather than views.
  bool writable() const { return writable_; }

 private:
  MappedFile(std::filesystem::path path, std::byte* data, uint64_t size, bool writable)
      : path_(std::move(path)), data_(data), size_(size), writable_(writable) {}

  std::filesystem::path path_;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  bool writable_ = true;
};

}  // namespace ferry::io
