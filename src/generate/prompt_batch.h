// Prompts of different lengths as one left-padded batch: padding goes on the left so that every
// row's last prompt token is in the last column, where decoding continues.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ferry {

struct PromptBatch {
  at::Tensor input_ids;       // (B, T) int64, pad_id on the left
  at::Tensor attention_mask;  // (B, T) int64, 0 at padding
};

// Throws InputError when there are no prompts or one is empty.
PromptBatch left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_id);

// Rows with the same prompt (GRPO's and PPO's copies of one): generation prefills each distinct
// prompt once, and RL's learners hold it once in a forward (train/rl/shared_prompt_pack.h).
struct SharedPrompts {
  at::Tensor unique_rows;  // (U) int64 CPU: the first row of each distinct prompt, in batch order
  at::Tensor prefill_row;  // (B) int64 CPU: for each row, its prompt's index in unique_rows
};

// ids, mask: (B, T) int64 on any device; rows whose ids and mask are equal in every column share.
SharedPrompts shared_prompts(const at::Tensor& ids, const at::Tensor& mask);

}  // namespace ferry
