// The activation meter's table of live blocks (see block_table.h).
#include "offload/block_table.h"

#include "core/error.h"

namespace ferry::offload {

size_t BlockTable::slot_of(const void* address) const {
  // Fibonacci hashing of the address without its alignment bits; the table size is a power of two.
  const uint64_t h = (reinterpret_cast<uintptr_t>(address) >> 4) * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h >> 20) & (addresses_.size() - 1);
}

void BlockTable::grow() {
  std::vector<const void*> old_addresses(addresses_.empty() ? 1024 : addresses_.size() * 2, nullptr);
  std::vector<uint64_t> old_bytes(old_addresses.size(), 0);
  old_addresses.swap(addresses_);
  old_bytes.swap(bytes_);
  count_ = 0;
  for (size_t i = 0; i < old_addresses.size(); ++i) {
    if (old_addresses[i] != nullptr) insert(old_addresses[i], old_bytes[i]);
  }
}

void BlockTable::insert(const void* address, uint64_t bytes) {
  FERRY_CHECK(address != nullptr, "block table: null address");
  if (2 * (count_ + 1) > addresses_.size()) grow();  // at most half full: short probes
  const size_t mask = addresses_.size() - 1;
  size_t i = slot_of(address);
  while (addresses_[i] != nullptr) {
    FERRY_CHECK(addresses_[i] != address, "block table: address recorded twice");
    i = (i + 1) & mask;
  }
  addresses_[i] = address;
  bytes_[i] = bytes;
  ++count_;
}

uint64_t BlockTable::take(const void* address) {
  if (count_ == 0) return 0;
  const size_t mask = addresses_.size() - 1;
  size_t i = slot_of(address);
  while (addresses_[i] != address) {
    if (addresses_[i] == nullptr) return 0;
    i = (i + 1) & mask;
  }
  const uint64_t bytes = bytes_[i];
  // Backward shift: move later entries of the probe run into the hole while that keeps each of
  // them at or after its home slot (cyclically), so lookups never stop at a false gap.
  size_t hole = i;
  for (size_t j = (i + 1) & mask; addresses_[j] != nullptr; j = (j + 1) & mask) {
    const size_t home = slot_of(addresses_[j]);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      addresses_[hole] = addresses_[j];
      bytes_[hole] = bytes_[j];
      hole = j;
    }
  }
  addresses_[hole] = nullptr;
  bytes_[hole] = 0;
  --count_;
  return bytes;
}

void BlockTable::clear() {
  addresses_.assign(addresses_.size(), nullptr);
  bytes_.assign(bytes_.size(), 0);
  count_ = 0;
}

}  // namespace ferry::offload
