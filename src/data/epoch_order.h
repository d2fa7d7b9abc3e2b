// The order in which a training run visits samples: a seeded permutation per epoch, and the
// cursor (epoch, position) that a checkpoint saves so a resumed run continues with exactly the
// samples it would have seen. Uses its own Fisher-Yates over splitmix64, not std::shuffle, so the
// order is the same with every C++ standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry {

// A permutation of 0..n-1, a pure function of (n, seed, epoch).
std::vector<int64_t> epoch_order(size_t n, uint64_t seed, int64_t epoch);

struct DataCursor {
  int64_t epoch = 0;
  int64_t position = 0;  // samples of this epoch already used
  bool operator==(const DataCursor&) const = default;
};

// Which of n samples a seeded random `fraction` holds out for evaluation (1: eval): at least one
// when fraction > 0 and n >= 2, never all. Deterministic for a given seed.
std::vector<uint8_t> eval_split_mask(size_t n, double fraction, uint64_t seed);

// Moves the samples eval_split_mask picks out of `train` into the returned eval set, keeping order.
template <class Sample>
std::vector<Sample> split_off_eval(std::vector<Sample>& train, double fraction, uint64_t seed) {
  const std::vector<uint8_t> is_eval = eval_split_mask(train.size(), fraction, seed);
  std::vector<Sample> eval, kept;
  for (size_t i = 0; i < train.size(); ++i) (is_eval[i] ? eval : kept).push_back(std::move(train[i]));
  train = std::move(kept);
  return eval;
}

// Hands out sample indices batch by batch across epochs; shuffle=false keeps file order.
class EpochSampler {
 public:
  EpochSampler(size_t dataset_size, uint64_t seed, bool shuffle, DataCursor start = {});

  // The next `count` sample indices, continuing into the next epoch when this one runs out (an
  // epoch's last batch is not cut short: it takes its remainder from the next epoch's order).
  std::vector<int64_t> next(size_t count);

  const DataCursor& cursor() const { return cursor_; }

 private:
  void load_epoch();

  size_t size_;
  uint64_t seed_;
  bool shuffle_;
  DataCursor cursor_;
  std::vector<int64_t> order_;
};

}  // namespace ferry
