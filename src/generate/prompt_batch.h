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

}  // namespace ferry
