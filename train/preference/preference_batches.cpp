// Collation of preference pairs (see preference_batches.h).
#include "train/preference/preference_batches.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/error.h"
#include "core/file_util.h"
#include "src/data/token_batch.h"

namespace ferry {
namespace {

// What loading a file kept and skipped, by reason (written to output.dir/data_stats.json).
nlohmann::json stats_json(const std::string& file, const PreferenceDatasetStats& s) {
  return {{"file", file},
          {"pairs", s.pairs},
          {"truncated", s.truncated},
          {"skipped", {{"empty_response", s.empty_response},
                       {"identical", s.identical},
                       {"no_room", s.no_room},
                       {"malformed_lines", s.jsonl.skipped}}}};
}

}  // namespace

PreferenceSplit load_preference_split(const Config& config, const Tokenizer& tokenizer,
                                      const ChatTemplate& chat_template, const std::string& stage, std::ostream& log) {
  const DataConfig& d = config.data;
  if (d.train_file.empty()) {
    throw ConfigError("data.train_file: " + stage + " needs a jsonl of preference pairs ({\"context\", \"chosen\", "
                      "\"rejected\"} or {\"prompt\", \"chosen\", \"rejected\"})");
  }
  PreferenceDataset train =
      load_preference_dataset(d.train_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, d.max_samples,
                              RowFormat::from_config(d));
  log << stage << ": " << d.train_file << ": " << train.stats.summary() << "\n";
  nlohmann::json stats{{"train", stats_json(d.train_file, train.stats)}};
  PreferenceSplit split{std::move(train.pairs), {}};
  if (!d.eval_file.empty()) {
    PreferenceDataset eval =
        load_preference_dataset(d.eval_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, 0,
                                RowFormat::from_config(d));
    log << stage << ": " << d.eval_file << ": " << eval.stats.summary() << "\n";
    stats["eval"] = stats_json(d.eval_file, eval.stats);
    split.eval = std::move(eval.pairs);
  } else if (d.eval_fraction > 0) {
    split.eval = split_off_eval(split.train, d.eval_fraction, static_cast<uint64_t>(config.train.seed));
    log << stage << ": " << split.eval.size() << " of the training pairs held out for evaluation\n";
  }
  std::filesystem::create_directories(config.output.dir);
  write_file_atomic(std::filesystem::path(config.output.dir) / "data_stats.json", stats.dump(2) + "\n");
  return split;
}

MicroBatch collate_preference_pairs(const std::vector<const PreferencePair*>& pairs, int64_t pad_id) {
  FERRY_CHECK(!pairs.empty(), "collate: no preference pairs");
  std::vector<const TokenizedSample*> rows;
  for (const PreferencePair* p : pairs) rows.push_back(&p->chosen);
  for (const PreferencePair* p : pairs) rows.push_back(&p->rejected);
  const TokenBatch batch = collate_padded(rows, pad_id);
  const int64_t b = static_cast<int64_t>(pairs.size());
  MicroBatch out;
  out.tensors["input_ids"] = batch.input_ids;            // (2B, T)
  out.tensors["attention_mask"] = batch.attention_mask;  // (2B, T)
  out.tensors["position_ids"] = batch.position_ids;      // (2B, T)
  out.tensors["labels"] = batch.labels;                  // (2B, T)
  torch::Tensor margin = at::empty({b}, at::kFloat);
  for (int64_t i = 0; i < b; ++i) margin[i] = pairs[static_cast<size_t>(i)]->margin;
  out.tensors["margin"] = margin;  // (B)
  if (pairs.front()->reference_chosen_logps) {
    torch::Tensor reference = at::empty({2 * b}, at::kDouble);
    for (int64_t i = 0; i < b; ++i) {
      const PreferencePair& p = *pairs[static_cast<size_t>(i)];
      FERRY_CHECK(p.reference_chosen_logps && p.reference_rejected_logps, "a pair without reference log-probs");
      reference[i] = *p.reference_chosen_logps;
      reference[b + i] = *p.reference_rejected_logps;
    }
    out.tensors["reference_logps"] = reference;  // (2B)
  }
  out.loss_weight = b;
  out.tokens = batch.tokens;
  return out;
}

PreferenceBatchSource::Options PreferenceBatchSource::Options::from_config(const Config& config, int64_t pad_id) {
  Options options;
  options.micro_batch_size = config.train.micro_batch_size;
  options.pad_id = pad_id;
  options.seed = static_cast<uint64_t>(config.train.seed);
  options.shuffle = config.data.shuffle;
  return options;
}

PreferenceBatchSource::PreferenceBatchSource(std::vector<PreferencePair> train, std::vector<PreferencePair> eval,
                                             const Options& options)
    : IndexedBatchSource({static_cast<int64_t>(train.size()), static_cast<int64_t>(eval.size()),
                          options.micro_batch_size, options.micro_batch_size},
                         options.seed, options.shuffle),
      train_(std::move(train)),
      eval_(std::move(eval)),
      options_(options) {
  if (train_.empty()) throw InputError("data.train_file: no preference pairs left after loading");
}

MicroBatch PreferenceBatchSource::collate(bool eval, const std::vector<int64_t>& indices) const {
  const auto& pairs = eval ? eval_ : train_;
  std::vector<const PreferencePair*> picked;
  for (int64_t i : indices) picked.push_back(&pairs[static_cast<size_t>(i)]);
  return collate_preference_pairs(picked, options_.pad_id);
}

}  // namespace ferry
