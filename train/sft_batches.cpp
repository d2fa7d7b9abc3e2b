// SFT's batches of tokenised conversations (see sft_batches.h).
#include "train/sft_batches.h"

#include <algorithm>

#include "core/error.h"
#include "src/data/token_batch.h"
#include "train/causal_lm_loss.h"

namespace ferry {

namespace {

// Samples per training micro-batch: micro_batch_size, or with packing about micro_batch_size rows
// of max_length tokens.
int64_t sft_samples_per_batch(const std::vector<TokenizedSample>& train, const SftBatchSource::Options& options) {
  if (train.empty()) throw InputError("data.train_file: no training samples left after loading and truncation");
  if (!options.packing) return options.micro_batch_size;
  int64_t tokens = 0;
  for (const auto& s : train) tokens += static_cast<int64_t>(s.ids.size());
  const int64_t mean = std::max<int64_t>(1, tokens / static_cast<int64_t>(train.size()));
  return options.micro_batch_size * std::max<int64_t>(1, options.max_length / mean);
}

}  // namespace

SftBatchSource::Options SftBatchSource::Options::from_config(const Config& config, int64_t pad_id) {
  Options options;
  options.micro_batch_size = config.train.micro_batch_size;
  options.pad_id = pad_id;
  options.seed = static_cast<uint64_t>(config.train.seed);
  options.shuffle = config.data.shuffle;
  options.max_length = config.data.max_length;
  return options;
}

SftBatchSource::SftBatchSource(std::vector<TokenizedSample> train, std::vector<TokenizedSample> eval,
                               const Options& options)
    : IndexedBatchSource({static_cast<int64_t>(train.size()), static_cast<int64_t>(eval.size()),
                          sft_samples_per_batch(train, options), options.micro_batch_size},
                         options.seed, options.shuffle),
      train_(std::move(train)),
      eval_(std::move(eval)),
      options_(options) {}

MicroBatch SftBatchSource::collate_samples(const std::vector<const TokenizedSample*>& samples) const {
  const TokenBatch batch = options_.packing ? collate_packed(samples, options_.pad_id, options_.max_length)
                                            : collate_padded(samples, options_.pad_id);
  MicroBatch out;
  out.tensors["input_ids"] = batch.input_ids;  // (B, T)
  out.tensors["attention_mask"] =
      options_.packing ? packed_attention_mask(batch.segment_ids) : batch.attention_mask;  // (B,1,T,T) | (B, T)
  out.tensors["position_ids"] = batch.position_ids;  // (B, T)
  out.tensors["labels"] = batch.labels;              // (B, T)
  out.loss_weight = shifted_label_count(batch.labels);
  out.tokens = batch.tokens;
  return out;
}

MicroBatch SftBatchSource::collate(bool eval, const std::vector<int64_t>& indices) const {
  const auto& samples = eval ? eval_ : train_;
  std::vector<const TokenizedSample*> picked;
  for (int64_t i : indices) picked.push_back(&samples[static_cast<size_t>(i)]);
  return collate_samples(picked);
}

}  // namespace ferry
