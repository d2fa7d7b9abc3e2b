// Left padding of prompt batches.
#include "src/generate/prompt_batch.h"

#include <ATen/ATen.h>

#include <algorithm>

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

}  // namespace ferry
