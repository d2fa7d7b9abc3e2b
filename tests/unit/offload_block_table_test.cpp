// BlockTable (the activation meter's live blocks) against std::unordered_map: random inserts and
// removals over few and many addresses (growth, long probe runs, deletions inside them).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "offload/block_table.h"

namespace ferry::offload {
namespace {

const void* address(uint64_t i) { return reinterpret_cast<const void*>(uintptr_t{0x10000} + i * 64); }

void run_against_reference(uint64_t addresses, int operations, uint32_t seed) {
  BlockTable table;
  std::unordered_map<const void*, uint64_t> reference;
  std::mt19937 random(seed);
  for (int op = 0; op < operations; ++op) {
    const void* a = address(random() % addresses);
    if (random() % 2 == 0 && reference.count(a) == 0) {
      const uint64_t bytes = 1 + random() % 100000;
      table.insert(a, bytes);
      reference[a] = bytes;
    } else {
      const auto it = reference.find(a);
      const uint64_t expected = it == reference.end() ? 0 : it->second;
      if (it != reference.end()) reference.erase(it);
      ASSERT_EQ(table.take(a), expected) << "operation " << op;
    }
    ASSERT_EQ(table.size(), reference.size());
  }
  for (const auto& [a, bytes] : reference) EXPECT_EQ(table.take(a), bytes);
  EXPECT_EQ(table.size(), 0u);
}

TEST(BlockTable, MatchesAMapOverFewAddresses) { run_against_reference(40, 20000, 1); }

TEST(BlockTable, MatchesAMapOverManyAddressesAndGrows) { run_against_reference(50000, 200000, 2); }

TEST(BlockTable, ClearForgetsEverythingAndRejectsDuplicates) {
  BlockTable table;
  for (uint64_t i = 0; i < 3000; ++i) table.insert(address(i), i + 1);
  EXPECT_EQ(table.take(address(7)), 8u);
  EXPECT_EQ(table.take(address(7)), 0u);
  EXPECT_THROW(table.insert(address(8), 1), InternalError);
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.take(address(9)), 0u);
  table.insert(address(9), 5);
  EXPECT_EQ(table.take(address(9)), 5u);
}

}  // namespace
}  // namespace ferry::offload
