// MemoryAccountant and MemoryReservation: counting resident bytes per tier and category.
#include "offload/accountant.h"

#include <algorithm>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"

namespace ferry::offload {
namespace {

size_t index_of(MemoryTier tier) { return static_cast<size_t>(tier); }

}  // namespace

uint64_t TierBudgets::of(MemoryTier tier) const {
  switch (tier) {
    case MemoryTier::device: return device;
    case MemoryTier::host: return host;
    case MemoryTier::nvme: return nvme;
  }
  return 0;
}

MemoryAccountant::MemoryAccountant(TierBudgets budgets) : budgets_(budgets) {}

void MemoryAccountant::add_locked(MemoryTier tier, MemoryCategory category, uint64_t bytes) {
  uint64_t& cell = state_.current.at(tier, category);
  cell += bytes;
  uint64_t& cell_peak = state_.peak.at(tier, category);
  cell_peak = std::max(cell_peak, cell);
  uint64_t& tier_peak = state_.tier_peak[index_of(tier)];
  tier_peak = std::max(tier_peak, tier_current_locked(tier));
}

void MemoryAccountant::subtract_locked(MemoryTier tier, MemoryCategory category, uint64_t bytes) {
  uint64_t& cell = state_.current.at(tier, category);
  FERRY_CHECK(bytes <= cell, "releasing ", bytes, " bytes of ", memory_category_name(category), " from ",
              memory_tier_name(tier), " where only ", cell, " are counted");
  cell -= bytes;
}

uint64_t MemoryAccountant::tier_current_locked(MemoryTier tier) const { return state_.current.tier_total(tier); }

bool MemoryAccountant::would_exceed_locked(MemoryTier tier, uint64_t bytes) const {
  const uint64_t budget = budgets_.of(tier);
  return budget != 0 && tier_current_locked(tier) + bytes > budget;
}

void MemoryAccountant::allocate(MemoryTier tier, MemoryCategory category, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  add_locked(tier, category, bytes);
}

bool MemoryAccountant::try_allocate(MemoryTier tier, MemoryCategory category, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (would_exceed_locked(tier, bytes)) return false;
  add_locked(tier, category, bytes);
  return true;
}

void MemoryAccountant::release(MemoryTier tier, MemoryCategory category, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  subtract_locked(tier, category, bytes);
}

void MemoryAccountant::move(MemoryCategory category, MemoryTier from, MemoryTier to, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  subtract_locked(from, category, bytes);
  add_locked(to, category, bytes);
}

bool MemoryAccountant::would_exceed(MemoryTier tier, uint64_t bytes) const {
  std::lock_guard lock(mutex_);
  return would_exceed_locked(tier, bytes);
}

uint64_t MemoryAccountant::current(MemoryTier tier) const {
  std::lock_guard lock(mutex_);
  return tier_current_locked(tier);
}

uint64_t MemoryAccountant::current(MemoryTier tier, MemoryCategory category) const {
  std::lock_guard lock(mutex_);
  return state_.current.at(tier, category);
}

uint64_t MemoryAccountant::peak(MemoryTier tier) const {
  std::lock_guard lock(mutex_);
  return state_.tier_peak[index_of(tier)];
}

uint64_t MemoryAccountant::peak(MemoryTier tier, MemoryCategory category) const {
  std::lock_guard lock(mutex_);
  return state_.peak.at(tier, category);
}

TierBudgets MemoryAccountant::budgets() const {
  std::lock_guard lock(mutex_);
  return budgets_;
}

void MemoryAccountant::set_budget(MemoryTier tier, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  switch (tier) {
    case MemoryTier::device: budgets_.device = bytes; break;
    case MemoryTier::host: budgets_.host = bytes; break;
    case MemoryTier::nvme: budgets_.nvme = bytes; break;
  }
}

void MemoryAccountant::reset_peaks() {
  std::lock_guard lock(mutex_);
  state_.peak = state_.current;
  for (MemoryTier tier : kAllMemoryTiers) state_.tier_peak[index_of(tier)] = tier_current_locked(tier);
}

MemorySnapshot MemoryAccountant::snapshot() const {
  std::lock_guard lock(mutex_);
  return state_;
}

std::string MemoryAccountant::report() const {
  const MemorySnapshot s = snapshot();
  const TierBudgets budgets = this->budgets();
  std::ostringstream out;
  for (MemoryTier tier : kAllMemoryTiers) {
    const uint64_t total = s.current.tier_total(tier);
    if (total == 0 && s.tier_peak[index_of(tier)] == 0 && budgets.of(tier) == 0) continue;  // unused tier
    out << memory_tier_name(tier) << ": current " << format_bytes_approx(total) << ", peak "
        << format_bytes_approx(s.tier_peak[index_of(tier)]) << ", budget "
        << (budgets.of(tier) == 0 ? std::string("unlimited") : format_bytes_approx(budgets.of(tier))) << "\n";
    for (MemoryCategory category : kAllMemoryCategories) {
      const uint64_t current = s.current.at(tier, category);
      const uint64_t peak = s.peak.at(tier, category);
      if (current == 0 && peak == 0) continue;
      std::string name(memory_category_name(category));
      name.resize(12, ' ');
      out << "  " << name << " current " << format_bytes_approx(current) << ", peak " << format_bytes_approx(peak)
          << "\n";
    }
  }
  return out.str();
}

MemoryReservation::MemoryReservation(MemoryAccountant& accountant, MemoryTier tier, MemoryCategory category,
                                     uint64_t bytes)
    : accountant_(&accountant), tier_(tier), category_(category), bytes_(bytes) {
  accountant_->allocate(tier_, category_, bytes_);
}

MemoryReservation::~MemoryReservation() { reset(); }

MemoryReservation::MemoryReservation(MemoryReservation&& other) noexcept
    : accountant_(other.accountant_), tier_(other.tier_), category_(other.category_), bytes_(other.bytes_) {
  other.accountant_ = nullptr;
  other.bytes_ = 0;
}

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& other) noexcept {
  if (this != &other) {
    reset();
    accountant_ = other.accountant_;
    tier_ = other.tier_;
    category_ = other.category_;
    bytes_ = other.bytes_;
    other.accountant_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void MemoryReservation::move_to(MemoryTier tier) {
  FERRY_CHECK(accountant_ != nullptr, "moving an empty MemoryReservation");
  if (tier == tier_) return;
  accountant_->move(category_, tier_, tier, bytes_);
  tier_ = tier;
}

void MemoryReservation::reset() {
  if (accountant_ != nullptr) accountant_->release(tier_, category_, bytes_);
  accountant_ = nullptr;
  bytes_ = 0;
}

}  // namespace ferry::offload
