// FNV-1a fingerprints (see fnv1a.h).
#include "core/fnv1a.h"

#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace ferry {

std::string Fnv1a::hex() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(state));
  return text;
}

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot be read");
  Fnv1a hash;
  uint64_t size = 0;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<size_t>(in.gcount());
    hash.add(buffer.data(), got);
    size += got;
  }
  if (in.bad()) throw InputError(path + ": read failed");
  return std::to_string(size) + ":" + hash.hex();
}

}  // namespace ferry
