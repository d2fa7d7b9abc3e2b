// Prefilling prompts of different lengths without computing their padding. Left-padded to the
// longest, a batch of prompts of 16-63 tokens is a third padding, and the prefill (every prompt
// token through every layer) is a third of a short rollout's generation. Packed, the prompts lie
// end to end in as few rows of the same width as fit them (first fit, longest first), each
// attending causally to itself only, at its own positions; each token's keys and values are then
// written to the slot its row and column have in the left-padded KV cache (KvCache::scatter_next),
// so decoding goes on exactly as after an unpacked prefill. Padding slots hold zeros (masked).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace ferry {

struct PackedPrefill {
  at::Tensor input_ids;     // (R, T) int64, R packed rows of the batch's width T
  at::Tensor attention;     // (R, 1, T, T) bool: causal within each prompt, padding sees itself
  at::Tensor position_ids;  // (R, T) int64: each token's position in its own prompt
  at::Tensor token_index;   // (N) int64: the prompts' tokens as flat indices into (R * T)
  at::Tensor cache_rows;    // (N) int64: each token's row in the unpacked batch
  at::Tensor cache_columns; // (N) int64: and its column there
  at::Tensor last_index;    // (B) int64: each row's last prompt token, a flat index into (R * T)
};

// ids, mask: (B, T) prompts with a 1/0 mask (any padding pattern; every row has a token), on any
// device; the result is on the same device. Nothing when packing would not save a row.
std::optional<PackedPrefill> pack_prefill(const at::Tensor& ids, const at::Tensor& mask);

}  // namespace ferry
