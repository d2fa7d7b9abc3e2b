// Packing prompts for the prefill (see packed_prefill.h).
#include "src/generate/packed_prefill.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "src/model/attention_mask.h"

namespace ferry {

std::optional<PackedPrefill> pack_prefill(const at::Tensor& ids, const at::Tensor& mask) {
  const int64_t batch = ids.size(0), width = ids.size(1);
  const at::Tensor host_ids = ids.cpu().to(at::kLong).contiguous(), host_mask = mask.cpu().to(at::kLong).contiguous();
  const int64_t* id = host_ids.data_ptr<int64_t>();
  const int64_t* on = host_mask.data_ptr<int64_t>();
  std::vector<int64_t> length(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < width; ++c) length[static_cast<size_t>(b)] += on[b * width + c] != 0;
  }
  // First fit, longest first: each prompt goes to the first packed row with room for it.
  std::vector<int64_t> order(static_cast<size_t>(batch));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return length[a] > length[b]; });
  std::vector<int64_t> used;                                        // per packed row: columns filled
  std::vector<std::pair<int64_t, int64_t>> place(static_cast<size_t>(batch));  // row -> (packed row, offset)
  for (int64_t b : order) {
    size_t row = 0;
    while (row < used.size() && used[row] + length[b] > width) ++row;
    if (row == used.size()) used.push_back(0);
    place[static_cast<size_t>(b)] = {static_cast<int64_t>(row), used[row]};
    used[row] += length[b];
  }
  const int64_t rows = static_cast<int64_t>(used.size());
  if (rows >= batch) return std::nullopt;

  at::Tensor packed_ids = at::zeros({rows, width}, at::kLong), positions = at::zeros({rows, width}, at::kLong);
  at::Tensor segment = at::full({rows, width}, -1, at::kLong);  // the batch row a packed token belongs to
  std::vector<int64_t> token_index, cache_rows, cache_columns, last_index(static_cast<size_t>(batch));
  int64_t* pid = packed_ids.data_ptr<int64_t>();
  int64_t* pos = positions.data_ptr<int64_t>();
  int64_t* seg = segment.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const auto [row, offset] = place[static_cast<size_t>(b)];
    int64_t i = 0;
    for (int64_t c = 0; c < width; ++c) {
      if (on[b * width + c] == 0) continue;
      const int64_t at = row * width + offset + i;
      pid[at] = id[b * width + c];
      pos[at] = i;
      seg[at] = b;
      token_index.push_back(at);
      cache_rows.push_back(b);
      cache_columns.push_back(c);
      ++i;
    }
    last_index[static_cast<size_t>(b)] = row * width + offset + i - 1;
  }
  const at::Tensor attention = packed_attention_mask(segment, segment >= 0, /*shared=*/-2);  // no shared prefix
  const auto device = ids.device();
  auto as_tensor = [&](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong).to(device); };
  return PackedPrefill{packed_ids.to(device),       attention.to(device),              positions.to(device),
                       as_tensor(token_index),      as_tensor(cache_rows),             as_tensor(cache_columns),
                       as_tensor(last_index)};
}

}  // namespace ferry
