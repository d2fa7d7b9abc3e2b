// Seeded, resumable batches of sample indices (see indexed_batch_source.h).
#include "train/indexed_batch_source.h"

#include <algorithm>

namespace ferry {

IndexedBatchSource::IndexedBatchSource(const Sizes& sizes, uint64_t seed, bool shuffle)
    : sizes_(sizes), seed_(seed), shuffle_(shuffle) {
  sampler_.emplace(static_cast<size_t>(sizes.train_samples), seed, shuffle);
}

int64_t IndexedBatchSource::batches_per_epoch() const {
  return (sizes_.train_samples + sizes_.train_batch - 1) / sizes_.train_batch;
}

MicroBatch IndexedBatchSource::next_train_batch() {
  return collate(/*eval=*/false, sampler_->next(static_cast<size_t>(sizes_.train_batch)));
}

DataCursor IndexedBatchSource::cursor() const { return sampler_->cursor(); }

void IndexedBatchSource::restore(const DataCursor& cursor) {
  sampler_.emplace(static_cast<size_t>(sizes_.train_samples), seed_, shuffle_, cursor);
}

std::vector<MicroBatch> IndexedBatchSource::eval_batches() const {
  std::vector<MicroBatch> batches;
  for (int64_t begin = 0; begin < sizes_.eval_samples; begin += sizes_.eval_batch) {
    std::vector<int64_t> indices;
    for (int64_t i = begin; i < std::min(sizes_.eval_samples, begin + sizes_.eval_batch); ++i) indices.push_back(i);
    batches.push_back(collate(/*eval=*/true, indices));
  }
  return batches;
}

}  // namespace ferry
