// Micro-batches of preference pairs for the reward-model and DPO stages: the B pairs' chosen
// sequences and then their rejected ones, right-padded into one (2B, T) batch so that both go
// through one forward (pair i is rows i and B + i).
//
// Tensors: input_ids, attention_mask, position_ids (2B, T); labels (2B, T), the response's final
// assistant turn, kIgnoreLabel elsewhere; margin (B) fp32; and, when the pairs carry precomputed
// reference log-probs (DPO's `precompute`), reference_logps (2B) fp64. loss_weight: B pairs.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/config/config.h"

#include "src/data/preference_dataset.h"
#include "train/indexed_batch_source.h"

namespace ferry {

class Tokenizer;
struct ChatTemplate;

// The pairs of data.train_file and of data.eval_file (or data.eval_fraction of the training pairs),
// with their load summaries written to `log` ("train-rm: data/x.jsonl: 2000 pairs, ...") and, as
// counts per skip reason, to output.dir/data_stats.json.
struct PreferenceSplit {
  std::vector<PreferencePair> train, eval;
};
PreferenceSplit load_preference_split(const Config& config, const Tokenizer& tokenizer,
                                      const ChatTemplate& chat_template, const std::string& stage, std::ostream& log);

// The micro-batch of `pairs`.
MicroBatch collate_preference_pairs(const std::vector<const PreferencePair*>& pairs, int64_t pad_id);

class PreferenceBatchSource : public IndexedBatchSource {
 public:
  struct Options {
    int64_t micro_batch_size = 4;  // pairs per micro-batch
    int64_t pad_id = 0;
    uint64_t seed = 0;
    bool shuffle = true;

    // train.micro_batch_size pairs, train.seed, data.shuffle.
    static Options from_config(const Config& config, int64_t pad_id);
  };
  PreferenceBatchSource(std::vector<PreferencePair> train, std::vector<PreferencePair> eval, const Options& options);


 protected:
  MicroBatch collate(bool eval, const std::vector<int64_t>& indices) const override;

 private:
  std::vector<PreferencePair> train_, eval_;
  Options options_;
};

}  // namespace ferry
