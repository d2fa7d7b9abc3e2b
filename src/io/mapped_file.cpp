// mmap of a whole file, private and copy-on-write (see mapped_file.h).
#include "src/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ferry::io {

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError("cannot read '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw InputError("cannot read '" + path.string() + "': " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError("cannot read '" + path.string() + "': not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  std::byte* data = nullptr;
  bool writable = true;
  if (size > 0) {
    void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED && errno == ENOMEM) {
      writable = false;
      mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    if (mapped == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw InputError("cannot map '" + path.string() + "' into memory: " + why);
    }
    data = static_cast<std::byte*>(mapped);
  }
  ::close(fd);  // the mapping keeps the file open
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size, writable));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace ferry::io
