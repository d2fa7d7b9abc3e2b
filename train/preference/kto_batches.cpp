// KTO's groups, KL rows and micro-batches (see kto_batches.h).
#include "train/preference/kto_batches.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "src/data/epoch_order.h"
#include "train/preference/preference_batches.h"

namespace ferry {
namespace {

size_t prompt_end(const TokenizedSample& s) {
  const auto first = std::find(s.loss_mask.begin(), s.loss_mask.end(), uint8_t{1});
  FERRY_CHECK(first != s.loss_mask.end(), "an unpaired example with no completion token (line ", s.line, ")");
  return static_cast<size_t>(first - s.loss_mask.begin());
}

}  // namespace

TokenizedSample mismatched_row(const TokenizedSample& prompt_of, const TokenizedSample& completion_of,
                               int64_t max_length) {
  const size_t prompt = prompt_end(prompt_of), completion = prompt_end(completion_of);
  TokenizedSample row;
  row.line = prompt_of.line;
  row.ids.assign(prompt_of.ids.begin(), prompt_of.ids.begin() + static_cast<std::ptrdiff_t>(prompt));
  row.loss_mask.assign(prompt, uint8_t{0});
  row.ids.insert(row.ids.end(), completion_of.ids.begin() + static_cast<std::ptrdiff_t>(completion),
                 completion_of.ids.end());
  row.loss_mask.insert(row.loss_mask.end(), completion_of.loss_mask.begin() + static_cast<std::ptrdiff_t>(completion),
                       completion_of.loss_mask.end());
  if (static_cast<int64_t>(row.ids.size()) > max_length) {
    row.ids.resize(static_cast<size_t>(max_length));
    row.loss_mask.resize(static_cast<size_t>(max_length));
  }
  return row;
}

KtoGroups group_kto_examples(std::vector<UnpairedExample> examples, int64_t group_size, int64_t max_length,
                             bool shuffle, uint64_t seed) {
  FERRY_CHECK(group_size >= 1, "KTO groups of at least one example");
  if (shuffle) {
    // Its own permutation (epoch -1), apart from the epochs' orders of the groups.
    const std::vector<int64_t> order = epoch_order(examples.size(), seed, -1);
    std::vector<UnpairedExample> shuffled;
    shuffled.reserve(examples.size());
    for (int64_t i : order) shuffled.push_back(std::move(examples[static_cast<size_t>(i)]));
    examples = std::move(shuffled);
  }
  const int64_t n = static_cast<int64_t>(examples.size());
  KtoGroups out;
  for (int64_t begin = 0; begin < n;) {
    int64_t end = std::min(n, begin + group_size);
    if (n - end == 1) end = n;  // a lone last example joins this group
    out.begin.push_back(begin);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t previous = i == begin ? end - 1 : i - 1;
      const TokenizedSample& row = examples[static_cast<size_t>(i)].sample;
      PreferencePair pair{row, mismatched_row(row, examples[static_cast<size_t>(previous)].sample, max_length), 0.0,
                          {}, {}};
      out.rows.push_back(std::move(pair));
      out.desirable.push_back(examples[static_cast<size_t>(i)].desirable ? 1 : 0);
    }
    begin = end;
  }
  out.begin.push_back(n);
  return out;
}

MicroBatch collate_kto_rows(const KtoGroups& groups, int64_t begin, int64_t end, int64_t pad_id) {
  std::vector<const PreferencePair*> rows;
  for (int64_t i = begin; i < end; ++i) rows.push_back(&groups.rows[static_cast<size_t>(i)]);
  MicroBatch batch = collate_preference_pairs(rows, pad_id);
  torch::Tensor desirable = at::empty({end - begin}, at::kBool);
  for (int64_t i = begin; i < end; ++i) desirable[i - begin] = groups.desirable[static_cast<size_t>(i)] != 0;
  batch.tensors["desirable"] = desirable;
  batch.tensors.erase("margin");
  return batch;
}

KtoBatchSource::KtoBatchSource(KtoGroups train, KtoGroups eval, int64_t pad_id, uint64_t seed, bool shuffle)
    : IndexedBatchSource({train.groups(), eval.groups(), 1, 1}, seed, shuffle),
      train_(std::move(train)),
      eval_(std::move(eval)),
      pad_id_(pad_id) {
  if (train_.rows.empty()) throw InputError("data.train_file: no examples left after loading");
}

MicroBatch KtoBatchSource::collate(bool eval, const std::vector<int64_t>& indices) const {
  const KtoGroups& groups = eval ? eval_ : train_;
  FERRY_CHECK(indices.size() == 1, "KTO batches hold one group");
  const auto g = static_cast<size_t>(indices.front());
  return collate_kto_rows(groups, groups.begin[g], groups.begin[g + 1], pad_id_);
}

}  // namespace ferry
