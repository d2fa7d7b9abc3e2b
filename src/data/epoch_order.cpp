// Seeded per-epoch permutations and the resumable sampler.
#include "src/data/epoch_order.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace ferry {
namespace {

// splitmix64: a small, well-mixed generator whose output is fixed by its definition.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int64_t> epoch_order(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  uint64_t state = seed * 0x100000001B3ull ^ (static_cast<uint64_t>(epoch) + 0x5bd1e995ull);
  for (size_t i = n; i > 1; --i) {
    // Unbiased enough for shuffling: 64-bit draws reduced modulo i (bias < i / 2^64).
    const size_t j = static_cast<size_t>(splitmix64(state) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

EpochSampler::EpochSampler(size_t dataset_size, uint64_t seed, bool shuffle, DataCursor start)
    : size_(dataset_size), seed_(seed), shuffle_(shuffle), cursor_(start) {
  if (size_ == 0) throw InputError("the training data has no usable samples");
  FERRY_CHECK(cursor_.position >= 0 && static_cast<size_t>(cursor_.position) <= size_, "bad data cursor");
  load_epoch();
}

void EpochSampler::load_epoch() {
  if (shuffle_) {
    order_ = epoch_order(size_, seed_, cursor_.epoch);
  } else {
    order_.resize(size_);
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
}

std::vector<int64_t> EpochSampler::next(size_t count) {
  std::vector<int64_t> indices;
  indices.reserve(count);
  while (indices.size() < count) {
    if (static_cast<size_t>(cursor_.position) == size_) {
      ++cursor_.epoch;
      cursor_.position = 0;
      load_epoch();
    }
    indices.push_back(order_[cursor_.position++]);
  }
  return indices;
}

std::vector<uint8_t> eval_split_mask(size_t n, double fraction, uint64_t seed) {
  std::vector<uint8_t> is_eval(n, 0);
  if (fraction <= 0 || n < 2) return is_eval;
  const auto order = epoch_order(n, seed, /*epoch=*/0);
  const size_t n_eval = std::clamp<size_t>(static_cast<size_t>(fraction * static_cast<double>(n)), 1, n - 1);
  for (size_t i = 0; i < n_eval; ++i) is_eval[static_cast<size_t>(order[i])] = 1;
  return is_eval;
}

}  // namespace ferry
