// BlockTable: the live memory blocks an ActivationMeter counts, by address. Open addressing with
// linear probing and backward-shift deletion: no allocation per insert or erase (the meter sees
// every CPU allocation of its thread, ~2 000 per decode step of a 30-layer model, so a node-based
// map's malloc and free per block cost ~1% of a rollout's generation; scripts/bench-rollout.sh).
// Not thread-safe; the meter locks around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::offload {

class BlockTable {
 public:
  // Records `bytes` at `address` (not null, not already present).
  void insert(const void* address, uint64_t bytes);
  // Removes `address` and returns its bytes; 0 when it is not recorded.
  uint64_t take(const void* address);
  void clear();
  size_t size() const { return count_; }

 private:
  size_t slot_of(const void* address) const;
  void grow();

  std::vector<const void*> addresses_;  // nullptr: empty slot
  std::vector<uint64_t> bytes_;
  size_t count_ = 0;
};

}  // namespace ferry::offload
