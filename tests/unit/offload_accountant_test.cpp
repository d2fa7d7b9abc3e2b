// MemoryAccountant: current and peak bytes per tier and category, budgets, moves, the RAII
// reservation, and exact counts under concurrent callers (gradient streaming's side thread).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/error.h"
#include "offload/accountant.h"

namespace ferry::offload {
namespace {

constexpr MemoryTier kDevice = MemoryTier::device;
constexpr MemoryTier kHost = MemoryTier::host;

TEST(Accountant, CurrentAndPeaksPerTierAndCategory) {
  MemoryAccountant a;
  a.allocate(kDevice, MemoryCategory::weights, 100);
  a.allocate(kDevice, MemoryCategory::activations, 50);  // device total 150: the tier's peak
  a.release(kDevice, MemoryCategory::activations, 50);
  a.allocate(kDevice, MemoryCategory::grads, 30);        // device total 130
  EXPECT_EQ(a.current(kDevice), 130u);
  EXPECT_EQ(a.peak(kDevice), 150u);
  EXPECT_EQ(a.current(kDevice, MemoryCategory::activations), 0u);
  EXPECT_EQ(a.peak(kDevice, MemoryCategory::activations), 50u);
  EXPECT_EQ(a.peak(kDevice, MemoryCategory::weights), 100u);
  EXPECT_EQ(a.peak(kDevice, MemoryCategory::grads), 30u);
  EXPECT_EQ(a.current(kHost), 0u);
  EXPECT_EQ(a.peak(kHost), 0u);
}

TEST(Accountant, MoveShiftsBytesBetweenTiers) {
  MemoryAccountant a;
  a.allocate(kHost, MemoryCategory::weights, 4096);
  a.move(MemoryCategory::weights, kHost, kDevice, 4096);  // page in
  EXPECT_EQ(a.current(kHost), 0u);
  EXPECT_EQ(a.current(kDevice, MemoryCategory::weights), 4096u);
  a.move(MemoryCategory::weights, kDevice, kHost, 4096);  // page out
  EXPECT_EQ(a.current(kDevice), 0u);
  EXPECT_EQ(a.peak(kDevice), 4096u);
  EXPECT_EQ(a.peak(kHost), 4096u);
}

TEST(Accountant, BudgetsAreCheckedNotEnforcedByAllocate) {
  MemoryAccountant a(TierBudgets{.device = 1000});
  a.allocate(kDevice, MemoryCategory::weights, 600);
  EXPECT_FALSE(a.would_exceed(kDevice, 400));  // exactly the budget is fine
  EXPECT_TRUE(a.would_exceed(kDevice, 401));
  EXPECT_FALSE(a.would_exceed(kHost, 1ull << 40));  // unlimited
  EXPECT_FALSE(a.try_allocate(kDevice, MemoryCategory::grads, 401));
  EXPECT_EQ(a.current(kDevice), 600u);  // a refused try counts nothing
  EXPECT_TRUE(a.try_allocate(kDevice, MemoryCategory::grads, 400));
  EXPECT_EQ(a.current(kDevice), 1000u);
  a.allocate(kDevice, MemoryCategory::activations, 10);  // an overshoot is still counted
  EXPECT_EQ(a.peak(kDevice), 1010u);
  a.set_budget(kDevice, 0);
  EXPECT_FALSE(a.would_exceed(kDevice, 1ull << 40));
}

TEST(Accountant, ReleasingMoreThanCountedIsABug) {
  MemoryAccountant a;
  a.allocate(kDevice, MemoryCategory::grads, 10);
  EXPECT_THROW(a.release(kDevice, MemoryCategory::grads, 11), InternalError);
  EXPECT_THROW(a.release(kDevice, MemoryCategory::weights, 1), InternalError);
  EXPECT_THROW(a.move(MemoryCategory::grads, kHost, kDevice, 1), InternalError);
  EXPECT_EQ(a.current(kDevice), 10u);
}

TEST(Accountant, ResetPeaksStartsFromCurrent) {
  MemoryAccountant a;
  a.allocate(kDevice, MemoryCategory::activations, 500);
  a.release(kDevice, MemoryCategory::activations, 400);
  a.reset_peaks();
  EXPECT_EQ(a.peak(kDevice), 100u);
  EXPECT_EQ(a.peak(kDevice, MemoryCategory::activations), 100u);
}

TEST(Accountant, ReservationReleasesWhereverItWent) {
  MemoryAccountant a;
  {
    MemoryReservation chunk(a, kHost, MemoryCategory::weights, 256);
    EXPECT_EQ(a.current(kHost), 256u);
    chunk.move_to(kDevice);
    EXPECT_EQ(a.current(kHost), 0u);
    EXPECT_EQ(a.current(kDevice), 256u);
    MemoryReservation moved = std::move(chunk);
    EXPECT_EQ(chunk.bytes(), 0u);  // NOLINT(bugprone-use-after-move): moved-from holds nothing
    EXPECT_EQ(moved.tier(), kDevice);
    EXPECT_EQ(a.current(kDevice), 256u);
  }
  EXPECT_EQ(a.current(kDevice), 0u);
  EXPECT_EQ(a.current(kHost), 0u);
  EXPECT_EQ(a.peak(kDevice), 256u);

  MemoryReservation r(a, kDevice, MemoryCategory::buffers, 64);
  r.reset();
  EXPECT_EQ(a.current(kDevice), 0u);
  MemoryReservation assigned(a, kDevice, MemoryCategory::buffers, 8);
  assigned = MemoryReservation(a, kHost, MemoryCategory::buffers, 16);  // the old 8 are released
  EXPECT_EQ(a.current(kDevice), 0u);
  EXPECT_EQ(a.current(kHost), 16u);
}

TEST(Accountant, ConcurrentCallersLoseNoUpdates) {
  MemoryAccountant a;
  constexpr int kThreads = 8;
  constexpr int kCalls = 20000;
  constexpr uint64_t kBytes = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&a, t] {
      const auto category = t % 2 == 0 ? MemoryCategory::grads : MemoryCategory::weights;
      for (int i = 0; i < kCalls; ++i) a.allocate(kDevice, category, kBytes);
    });
  }
  for (auto& thread : threads) thread.join();
  const uint64_t total = uint64_t{kThreads} * kCalls * kBytes;  // 160,000,000
  EXPECT_EQ(a.current(kDevice), total);
  EXPECT_EQ(a.peak(kDevice), total);
  EXPECT_EQ(a.current(kDevice, MemoryCategory::grads), total / 2);

  // Pairs of allocate/release from every thread: all back to zero, and the tier's peak never
  // exceeds what all threads could hold at once on top of the total above.
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&a] {
      for (int i = 0; i < kCalls; ++i) {
        MemoryReservation staging(a, kDevice, MemoryCategory::buffers, kBytes);
        staging.move_to(kHost);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(a.current(kDevice, MemoryCategory::buffers), 0u);
  EXPECT_EQ(a.current(kHost), 0u);
  EXPECT_LE(a.peak(kDevice), total + kThreads * kBytes);
  EXPECT_GE(a.peak(kDevice), total + kBytes);
  EXPECT_LE(a.peak(kHost), kThreads * kBytes);
}

TEST(Accountant, ReportNamesTiersCategoriesAndBudget) {
  MemoryAccountant a(TierBudgets{.device = 8ull << 30});
  a.allocate(kDevice, MemoryCategory::weights, 3ull << 30);
  a.allocate(kHost, MemoryCategory::moments, 1ull << 20);
  const std::string report = a.report();
  EXPECT_NE(report.find("device: current 3.00 GiB, peak 3.00 GiB, budget 8.00 GiB"), std::string::npos) << report;
  EXPECT_NE(report.find("moments"), std::string::npos) << report;
  EXPECT_NE(report.find("budget unlimited"), std::string::npos) << report;
  EXPECT_EQ(report.find("nvme"), std::string::npos) << report;  // unused tiers are left out
}

}  // namespace
}  // namespace ferry::offload
