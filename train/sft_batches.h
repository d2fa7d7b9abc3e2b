// Batches for supervised fine-tuning (train-sft, and PPO's ptx mix): tokenised conversations in
// seeded epoch order, padded or packed, with labels on the assistant turns.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config/config.h"
#include "src/data/sft_dataset.h"
#include "train/indexed_batch_source.h"

namespace ferry {

// Batches of tokenised conversations in seeded epoch order: right-padded rows of
// micro_batch_size samples, or with `packing` about micro_batch_size rows of max_length tokens
// (a fixed number of samples per micro-batch, micro_batch_size * max(1, max_length / mean sample
// length), so the cursor stays a sample count and resume is exact).
class SftBatchSource : public IndexedBatchSource {
 public:
  struct Options {
    int64_t micro_batch_size = 4;
    int64_t pad_id = 0;
    uint64_t seed = 0;
    bool shuffle = true;
    bool packing = false;
    int64_t max_length = 512;
    // train.micro_batch_size, train.seed, data.shuffle and data.max_length (no packing).
    static Options from_config(const Config& config, int64_t pad_id);
  };
  SftBatchSource(std::vector<TokenizedSample> train, std::vector<TokenizedSample> eval, const Options& options);


  // Tensors of a micro-batch from samples (input_ids, attention_mask, position_ids, labels).
  MicroBatch collate_samples(const std::vector<const TokenizedSample*>& samples) const;

 protected:
  MicroBatch collate(bool eval, const std::vector<int64_t>& indices) const override;

 private:
  std::vector<TokenizedSample> train_, eval_;
  Options options_;
};

}  // namespace ferry
