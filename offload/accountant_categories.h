// The vocabulary of memory accounting: where bytes live (MemoryTier) and what they are
// (MemoryCategory), and a table of bytes per tier × category. The accountant counts live bytes in
// this table at run time; the memory model predicts the same table before a run, so a test can
// hold one against the other. Torch-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::offload {

// nvme is named now so reports and tables keep their shape when the NVMe tier arrives.
enum class MemoryTier { device, host, nvme };
inline constexpr size_t kNumMemoryTiers = 3;

enum class MemoryCategory {
  weights,      // parameters in the compute dtype (bf16/fp16, or fp32 for fp32 training)
  grads,        // parameter gradients (and their staging buffers)
  master,       // fp32 master weights kept by the optimizer
  moments,      // Adam m and v
  activations,  // tensors saved for backward, logits, backward workspace
  buffers,      // CUDA context and workspaces, transfer staging not counted elsewhere
};
inline constexpr size_t kNumMemoryCategories = 6;

inline constexpr std::array<MemoryTier, kNumMemoryTiers> kAllMemoryTiers{MemoryTier::device, MemoryTier::host,
                                                                         MemoryTier::nvme};
inline constexpr std::array<MemoryCategory, kNumMemoryCategories> kAllMemoryCategories{
    MemoryCategory::weights, MemoryCategory::grads,       MemoryCategory::master,
    MemoryCategory::moments, MemoryCategory::activations, MemoryCategory::buffers};

constexpr std::string_view memory_tier_name(MemoryTier tier) {
  switch (tier) {
    case MemoryTier::device: return "device";
    case MemoryTier::host: return "host";
    case MemoryTier::nvme: return "nvme";
  }
  return "?";
}

constexpr std::string_view memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::weights: return "weights";
    case MemoryCategory::grads: return "grads";
    case MemoryCategory::master: return "master";
    case MemoryCategory::moments: return "moments";
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::buffers: return "buffers";
  }
  return "?";
}

// Bytes per tier × category.
struct TierCategoryBytes {
  std::array<std::array<uint64_t, kNumMemoryCategories>, kNumMemoryTiers> bytes{};

  uint64_t& at(MemoryTier tier, MemoryCategory category) {
    return bytes[static_cast<size_t>(tier)][static_cast<size_t>(category)];
  }
  uint64_t at(MemoryTier tier, MemoryCategory category) const {
    return bytes[static_cast<size_t>(tier)][static_cast<size_t>(category)];
  }
  uint64_t tier_total(MemoryTier tier) const {
    uint64_t sum = 0;
    for (uint64_t b : bytes[static_cast<size_t>(tier)]) sum += b;
    return sum;
  }
  bool operator==(const TierCategoryBytes&) const = default;
};

}  // namespace ferry::offload
