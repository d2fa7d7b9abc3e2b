// From a (B, T) attention mask of 1 (token) / 0 (padding) to what attention needs: position ids
// (left padding starts each row at position 0) and the boolean (B, 1, T_query, T_key) mask for
// scaled_dot_product_attention (causal AND key is not padding), and Mistral's sliding window.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ferry {

// (B, T) 1/0 mask -> (B, T) int64 positions: cumsum - 1 at tokens, 0 at padding, exactly as
// transformers' generate derives them.
at::Tensor position_ids_from_attention_mask(const at::Tensor& attention_mask);

// The attention mask for `query_length` new tokens that follow `past_length` cached ones.
// attention_mask: (B, past_length + query_length) 1/0, or undefined (no padding).
// Returns bool (B or 1, 1, T_query, T_key), true where a query may attend a key, or an undefined
// tensor when plain causal attention (or, for a single query, no mask at all) is exact; the caller
// then passes is_causal = (T_query > 1) to scaled_dot_product_attention.
// A padding query sees at least itself: with every key masked, softmax would give NaN, which
// would then leak through 0 * NaN into other rows' attention outputs.
at::Tensor build_attention_mask(const at::Tensor& attention_mask, int64_t query_length, int64_t past_length);

// The mask of rows that pack several sequences (generation's packed prefill, RL's shared prompts):
// bool (R, 1, T, T), query t may attend key s when s <= t, s is a token (is_token (R, T) bool), and
// s's segment (segment (R, T) int64) is t's or `shared` — a prefix every segment sees (RL's
// shared prompt; a value no column has for none). A padding query sees at least itself.
at::Tensor packed_attention_mask(const at::Tensor& segment, const at::Tensor& is_token, int64_t shared);

// Mistral's sliding window on top of a mask: the query at index past_length + i may attend key j
// only when past_length + i - j < window, i.e. itself and the window - 1 keys before it
// (transformers' sliding_window_overlay; indices count padding, as transformers' do).
// mask: what build_attention_mask returns (undefined: plain causal) or a full bool
// (B|1, 1, T_query, T_key) mask. Returns `mask` unchanged when window is 0 or no key lies outside
// the window (T_key <= window), else bool (B|1, 1, T_query, T_key) on `device`.
at::Tensor apply_sliding_window(const at::Tensor& mask, int64_t query_length, int64_t past_length, int64_t window,
                                at::Device device);

}  // namespace ferry
