// MemoryAccountant: the count of bytes resident in each tier (device, host, nvme) per category
// (weights, grads, master, moments, activations, buffers), with current and peak values and a
// budget per tier. The offload engine reports every allocation, release and move to it; tests and
// CI assert its peaks. On a machine without a GPU the device tier is emulated in host memory, so
// the accountant is the only thing that knows what is "on the device".
//
// Thread-safe: gradient streaming reports from a side thread while the main thread runs backward.
// One mutex guards everything, so a tier's total and its peak are always consistent with each
// other (calls happen per chunk, not per element, so contention is negligible).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "offload/accountant_categories.h"

namespace ferry::offload {

// Budgets per tier in bytes; 0 means unlimited.
struct TierBudgets {
  uint64_t device = 0;
  uint64_t host = 0;
  uint64_t nvme = 0;

  uint64_t of(MemoryTier tier) const;
};

struct MemorySnapshot {
  TierCategoryBytes current;
  TierCategoryBytes peak;  // per-category peaks: each cell's own maximum over time
  std::array<uint64_t, kNumMemoryTiers> tier_peak{};  // maximum over time of each tier's total
};

class MemoryAccountant {
 public:
  explicit MemoryAccountant(TierBudgets budgets = {});

  MemoryAccountant(const MemoryAccountant&) = delete;
  MemoryAccountant& operator=(const MemoryAccountant&) = delete;

  // Counts `bytes` as resident in `tier` under `category`. Counting never fails: budgets are
  // checked by would_exceed / try_allocate, so a run that overshoots still reports its true peak.
  void allocate(MemoryTier tier, MemoryCategory category, uint64_t bytes);
  // Checks the budget and counts in one step (atomic with respect to other threads); false, and
  // nothing counted, when the tier's budget would be exceeded.
  bool try_allocate(MemoryTier tier, MemoryCategory category, uint64_t bytes);
  // Uncounts; releasing more than is resident is a bug (InternalError).
  void release(MemoryTier tier, MemoryCategory category, uint64_t bytes);
  // A copy that ends with the source freed: release in `from`, allocate in `to`, atomically.
  void move(MemoryCategory category, MemoryTier from, MemoryTier to, uint64_t bytes);

  // True when `bytes` more in `tier` would go over its budget (never for an unlimited tier).
  bool would_exceed(MemoryTier tier, uint64_t bytes) const;

  uint64_t current(MemoryTier tier) const;
  uint64_t current(MemoryTier tier, MemoryCategory category) const;
  uint64_t peak(MemoryTier tier) const;
  uint64_t peak(MemoryTier tier, MemoryCategory category) const;
  TierBudgets budgets() const;
  void set_budget(MemoryTier tier, uint64_t bytes);

  // Peaks restart from the current values (e.g. to measure one training step).
  void reset_peaks();
  MemorySnapshot snapshot() const;

  // Current and peak bytes per tier and category, with budgets, as an aligned text table.
  std::string report() const;

 private:
  void add_locked(MemoryTier tier, MemoryCategory category, uint64_t bytes);
  void subtract_locked(MemoryTier tier, MemoryCategory category, uint64_t bytes);
  uint64_t tier_current_locked(MemoryTier tier) const;
  bool would_exceed_locked(MemoryTier tier, uint64_t bytes) const;

  mutable std::mutex mutex_;
  TierBudgets budgets_;
  MemorySnapshot state_;
};

// RAII: counts `bytes` on construction and uncounts them on destruction, wherever they have moved
// to in between. Movable, not copyable. A default-constructed reservation holds nothing.
class MemoryReservation {
 public:
  MemoryReservation() = default;
  MemoryReservation(MemoryAccountant& accountant, MemoryTier tier, MemoryCategory category, uint64_t bytes);
  ~MemoryReservation();

  MemoryReservation(MemoryReservation&& other) noexcept;
  MemoryReservation& operator=(MemoryReservation&& other) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  // Moves the reserved bytes to another tier (a page-in or page-out).
  void move_to(MemoryTier tier);
  // Uncounts now; the destructor then does nothing.
  void reset();

  MemoryTier tier() const { return tier_; }
  MemoryCategory category() const { return category_; }
  uint64_t bytes() const { return bytes_; }

 private:
  MemoryAccountant* accountant_ = nullptr;
  MemoryTier tier_ = MemoryTier::device;
  MemoryCategory category_ = MemoryCategory::buffers;
  uint64_t bytes_ = 0;
};

}  // namespace ferry::offload
