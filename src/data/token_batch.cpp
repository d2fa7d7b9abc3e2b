// Padding and packing collation.
#include "src/data/token_batch.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"

namespace ferry {
namespace {

// Rows of sample pointers -> tensors, padding each row on the right to the longest row.
TokenBatch collate_rows(const std::vector<std::vector<const TokenizedSample*>>& rows, int64_t pad_id, bool packed) {
  FERRY_CHECK(!rows.empty(), "collate: no samples");
  int64_t width = 0;
  for (const auto& row : rows) {
    int64_t length = 0;
    for (const auto* s : row) length += static_cast<int64_t>(s->ids.size());
    width = std::max(width, length);
  }
  const int64_t batch = static_cast<int64_t>(rows.size());
  const auto options = at::TensorOptions().dtype(at::kLong);
  TokenBatch out;
  out.input_ids = at::full({batch, width}, pad_id < 0 ? 0 : pad_id, options);
  out.attention_mask = at::zeros({batch, width}, options);
  out.labels = at::full({batch, width}, kIgnoreLabel, options);
  out.position_ids = at::zeros({batch, width}, options);
  if (packed) out.segment_ids = at::zeros({batch, width}, options);
  auto ids = out.input_ids.accessor<int64_t, 2>();
  auto mask = out.attention_mask.accessor<int64_t, 2>();
  auto labels = out.labels.accessor<int64_t, 2>();
  auto positions = out.position_ids.accessor<int64_t, 2>();
  int64_t* segments = packed ? out.segment_ids.data_ptr<int64_t>() : nullptr;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t t = 0;
    int64_t segment = 0;
    for (const auto* sample : rows[b]) {
      ++segment;
      for (size_t i = 0; i < sample->ids.size(); ++i, ++t) {
        ids[b][t] = sample->ids[i];
        mask[b][t] = 1;
        positions[b][t] = static_cast<int64_t>(i);
        if (sample->loss_mask[i]) {
          labels[b][t] = sample->ids[i];
          ++out.loss_tokens;
        }
        if (segments) segments[b * width + t] = segment;
      }
      out.tokens += static_cast<int64_t>(sample->ids.size());
    }
    // Padding positions: counting on after a padded sample (as transformers would), 0 in packed rows.
    for (int64_t p = t; p < width; ++p) positions[b][p] = packed ? 0 : p;
  }
  return out;
}

}  // namespace

TokenBatch collate_padded(const std::vector<const TokenizedSample*>& samples, int64_t pad_id) {
  std::vector<std::vector<const TokenizedSample*>> rows;
  for (const auto* s : samples) rows.push_back({s});
  return collate_rows(rows, pad_id, /*packed=*/false);
}

TokenBatch collate_packed(const std::vector<const TokenizedSample*>& samples, int64_t pad_id, int64_t row_length) {
  std::vector<std::vector<const TokenizedSample*>> rows;
  std::vector<int64_t> used;
  for (const auto* s : samples) {
    const auto length = static_cast<int64_t>(s->ids.size());
    FERRY_CHECK(length <= row_length, "sample of ", length, " tokens does not fit a packed row of ", row_length);
    size_t r = 0;
    while (r < rows.size() && used[r] + length > row_length) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      used.push_back(0);
    }
    rows[r].push_back(s);
    used[r] += length;
  }
  return collate_rows(rows, pad_id, /*packed=*/true);
}

at::Tensor packed_attention_mask(const at::Tensor& segment_ids) {
  const int64_t width = segment_ids.size(1);
  const at::Tensor same = segment_ids.unsqueeze(2).eq(segment_ids.unsqueeze(1)) & segment_ids.ne(0).unsqueeze(2);
  const auto bool_options = at::TensorOptions().dtype(at::kBool);
  const at::Tensor causal = at::ones({width, width}, bool_options).tril();
  // Padding queries attend to themselves only: a fully masked row would give NaN, and NaN
  // activations poison the gradients even where the loss ignores them.
  const at::Tensor self = at::eye(width, bool_options);
  return ((same & causal) | self).unsqueeze(1);
}

}  // namespace ferry
