// Collation of tokenised samples into the tensors a forward pass takes: right-padded rows, or
// several samples packed into each row (data.packing) with attention kept inside each sample.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "src/data/sft_dataset.h"

namespace ferry {

// Label value the loss ignores (as Hugging Face's -100).
inline constexpr int64_t kIgnoreLabel = -100;

struct TokenBatch {
  at::Tensor input_ids;       // (B, T) int64; pad positions hold the pad id
  at::Tensor attention_mask;  // (B, T) int64, 1 on real tokens
  at::Tensor labels;          // (B, T) int64: the token where the loss is taken, else kIgnoreLabel.
                              // Position t's logits predict labels[t + 1] (the loss shifts).
  at::Tensor position_ids;    // (B, T) int64; restart at 0 for each packed sample
  at::Tensor segment_ids;     // (B, T) int64, packing only: 1.. per sample, 0 on padding; else undefined
  int64_t tokens = 0;         // real (non-pad) tokens
  int64_t loss_tokens = 0;    // tokens with a label
};

// Right-pads `samples` to the longest one.
TokenBatch collate_padded(const std::vector<const TokenizedSample*>& samples, int64_t pad_id);

// Packs samples, in the given order, first-fit into rows of at most `row_length` tokens (a sample
// never spans two rows), then pads the rows to the longest. Every sample must fit a row.
TokenBatch collate_packed(const std::vector<const TokenizedSample*>& samples, int64_t pad_id, int64_t row_length);

// The attention mask packed rows need: bool (B, 1, T, T), true where query t may attend key s:
// s <= t and both in the same sample (segment ids equal and non-zero), or s == t (so padding
// rows are never fully masked).
at::Tensor packed_attention_mask(const at::Tensor& segment_ids);

}  // namespace ferry
