// FNV-1a, 64-bit: a fixed, library-independent hash for fingerprints that are written to disk
// (cached reference log-probs, a pipeline stage's input files) and must not change between builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

struct Fnv1a {
  uint64_t state = 0xcbf29ce484222325ull;
  void add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) state = (state ^ bytes[i]) * 0x100000001b3ull;
  }
  void add(const std::string& text) { add(text.data(), text.size()); }
  template <class T>
  void add(const std::vector<T>& values) {
    const uint64_t n = values.size();
    add(&n, sizeof n);
    add(values.data(), values.size() * sizeof(T));
  }
  // The state as 16 hex digits.
  std::string hex() const;
};

// "<bytes>:<16 hex digits>" of a file's contents; throws InputError naming the file when it cannot
// be read.
std::string file_fingerprint(const std::string& path);

}  // namespace ferry
