// Left padding of prompt batches.
#include "src/generate/prompt_batch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.h"

namespace ferry {

PromptBatch left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_id) {
  if (prompts.empty()) throw InputError("no prompts to generate from");
  size_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) throw InputError(detail::concat("prompt ", i, " has no tokens"));
    longest = std::max(longest, prompts[i].size());
  }
  const auto rows = static_cast<int64_t>(prompts.size()), cols = static_cast<int64_t>(longest);
  PromptBatch batch{at::full({rows, cols}, pad_id, at::kLong), at::zeros({rows, cols}, at::kLong)};
  auto ids = batch.input_ids.accessor<int64_t, 2>();
  auto mask = batch.attention_mask.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    const auto& prompt = prompts[static_cast<size_t>(r)];
    const int64_t start = cols - static_cast<int64_t>(prompt.size());
    for (size_t j = 0; j < prompt.size(); ++j) {
      ids[r][start + static_cast<int64_t>(j)] = prompt[j];
      mask[r][start + static_cast<int64_t>(j)] = 1;
    }
  }
  return batch;
}

SharedPrompts shared_prompts(const at::Tensor& ids, const at::Tensor& mask) {
  const at::Tensor host_ids = ids.cpu().contiguous(), host_mask = mask.cpu().contiguous();
  const int64_t rows = ids.size(0), length = ids.size(1);
  const int64_t* id = host_ids.data_ptr<int64_t>();
  const int64_t* on = host_mask.data_ptr<int64_t>();
  std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, int64_t> seen;
  std::vector<int64_t> unique, prefill_row;
  for (int64_t r = 0; r < rows; ++r) {
    auto key = std::make_pair(std::vector<int64_t>(id + r * length, id + (r + 1) * length),
                              std::vector<int64_t>(on + r * length, on + (r + 1) * length));
    const auto [it, fresh] = seen.emplace(std::move(key), static_cast<int64_t>(unique.size()));
    if (fresh) unique.push_back(r);
    prefill_row.push_back(it->second);
  }
  return {at::tensor(unique, at::kLong), at::tensor(prefill_row, at::kLong)};
}

}  // namespace ferry
