// Reading files with clear errors, and atomic writes (temp + fsync + rename).
#include "core/file_util.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/atomic_file_writer.h"
#include "core/error.h"

namespace ferry {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read '" + path.string() + "': " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::filesystem::path temporary_sibling(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  auto name = path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  return path.parent_path() / name;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  AtomicFileWriter out(path, content.size());
  out.write(content.data(), content.size());
  out.commit();
}

}  // namespace ferry
