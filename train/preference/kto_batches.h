// KTO's micro-batches (`ferry train-kto`). The examples are put in groups of
// train.micro_batch_size once (after one seeded shuffle when data.shuffle; a lone last example
// joins the group before it), and each example gets its KL row: its own prompt followed by the
// completion of the example before it in its group (the first takes the last's) — TRL's mismatched
// pairs, whose mean log-ratio estimates KTO's KL term. A group is one micro-batch in every epoch
// (only the order of the groups is shuffled), so the KL rows always hold the completions the batch
// trains on, as TRL's sequential batches do, and their reference log-probs can be precomputed.
//
// A group's examples are stored as PreferencePairs {row, KL row}, so collation, the precomputed
// reference cache and the forward are the pairs': rows 0..B-1 of a micro-batch are the examples,
// B..2B-1 their KL rows. Tensors: those of preference_batches.h, plus desirable (B) bool.
// loss_weight: B examples.
#pragma once

#include <cstdint>
#include <vector>

#include "src/data/preference_dataset.h"
#include "src/data/unpaired_dataset.h"
#include "train/indexed_batch_source.h"

namespace ferry {

// `prompt_of`'s prompt (its ids before the first loss-mask 1) followed by `completion_of`'s
// completion (its ids from there on, with their loss mask), cut at max_length.
TokenizedSample mismatched_row(const TokenizedSample& prompt_of, const TokenizedSample& completion_of,
                               int64_t max_length);

struct KtoGroups {
  std::vector<PreferencePair> rows;  // {example, its KL row}, group after group
  std::vector<uint8_t> desirable;    // per row
  std::vector<int64_t> begin;        // group g is rows [begin[g], begin[g + 1]); begin.back() == rows.size()

  int64_t groups() const { return static_cast<int64_t>(begin.size()) - 1; }
};
KtoGroups group_kto_examples(std::vector<UnpairedExample> examples, int64_t group_size, int64_t max_length,
                             bool shuffle, uint64_t seed);

// The micro-batch of rows [begin, end) of `groups`.
MicroBatch collate_kto_rows(const KtoGroups& groups, int64_t begin, int64_t end, int64_t pad_id);

class KtoBatchSource : public IndexedBatchSource {
 public:
  // Training batches: one group each, groups in seeded epoch order when `shuffle`.
  KtoBatchSource(KtoGroups train, KtoGroups eval, int64_t pad_id, uint64_t seed, bool shuffle);

 protected:
  MicroBatch collate(bool eval, const std::vector<int64_t>& indices) const override;

 private:
  KtoGroups train_, eval_;
  int64_t pad_id_;
};

}  // namespace ferry
