// IndexedBatchSource: the part of a BatchSource that every stage reading a sample file shares —
// training batches of sample indices in seeded epoch order (resumable through the cursor), and the
// evaluation set in file order. A stage's source only says how indices become tensors (collate).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "src/data/epoch_order.h"
#include "train/training_task.h"

namespace ferry {

class IndexedBatchSource : public BatchSource {
 public:
  struct Sizes {
    int64_t train_samples = 0;
    int64_t eval_samples = 0;
    int64_t train_batch = 1;  // samples per training micro-batch
    int64_t eval_batch = 1;   // samples per evaluation batch
  };
  IndexedBatchSource(const Sizes& sizes, uint64_t seed, bool shuffle);

  int64_t batches_per_epoch() const override;
  MicroBatch next_train_batch() override;
  DataCursor cursor() const override;
  void restore(const DataCursor& cursor) override;
  std::vector<MicroBatch> eval_batches() const override;

 protected:
  // The micro-batch of training samples (eval false) or evaluation samples (eval true) `indices`.
  virtual MicroBatch collate(bool eval, const std::vector<int64_t>& indices) const = 0;

 private:
  Sizes sizes_;
  uint64_t seed_;
  bool shuffle_;
  std::optional<EpochSampler> sampler_;
};

}  // namespace ferry
