// Attention masks and position ids from a padding mask; the sliding window.
#include "src/model/attention_mask.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace ferry {

at::Tensor position_ids_from_attention_mask(const at::Tensor& attention_mask) {
  const at::Tensor mask = attention_mask.to(at::kLong);
  return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0);
}

at::Tensor build_attention_mask(const at::Tensor& attention_mask, int64_t query_length, int64_t past_length) {
  const int64_t key_length = past_length + query_length;
  const bool has_padding = attention_mask.defined() && !attention_mask.to(at::kBool).all().item<bool>();
  if (!has_padding && (past_length == 0 || query_length == 1)) return {};
  const auto device = attention_mask.defined() ? attention_mask.device() : at::Device(at::kCPU);
  const auto index = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor query_pos = (at::arange(query_length, index) + past_length).unsqueeze(1);  // (Tq, 1)
  const at::Tensor key_pos = at::arange(key_length, index).unsqueeze(0);                      // (1, Tk)
  at::Tensor allowed = (key_pos <= query_pos).view({1, 1, query_length, key_length});
  if (has_padding) {
    FERRY_CHECK(attention_mask.dim() == 2 && attention_mask.size(1) == key_length,
                "attention mask must cover past and new tokens");
    const at::Tensor key_is_token = attention_mask.to(at::kBool).view({attention_mask.size(0), 1, 1, key_length});
    allowed = at::logical_or(at::logical_and(allowed, key_is_token), (key_pos == query_pos).view({1, 1, query_length, key_length}));
  }
  return allowed;
}

at::Tensor packed_attention_mask(const at::Tensor& segment, const at::Tensor& is_token, int64_t shared) {
  const int64_t length = segment.size(1);
  const auto index = at::TensorOptions().dtype(at::kLong).device(segment.device());
  const at::Tensor column = at::arange(length, index);
  const at::Tensor causal = (column.unsqueeze(0) <= column.unsqueeze(1)).unsqueeze(0);  // (1, q, s)
  const at::Tensor key = segment.unsqueeze(1), query = segment.unsqueeze(2);
  const at::Tensor visible = at::logical_or(key == shared, key == query);                // (R, q, s)
  const at::Tensor self = at::eye(length, index.dtype(at::kBool)).unsqueeze(0);
  return at::logical_or(causal & is_token.unsqueeze(1) & visible, self).unsqueeze(1);
}

at::Tensor apply_sliding_window(const at::Tensor& mask, int64_t query_length, int64_t past_length, int64_t window,
                                at::Device device) {
  const int64_t key_length = past_length + query_length;
  if (window <= 0 || key_length <= window) return mask;
  const auto index = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor query_pos = (at::arange(query_length, index) + past_length).unsqueeze(1);  // (Tq, 1)
  const at::Tensor key_pos = at::arange(key_length, index).unsqueeze(0);                      // (1, Tk)
  const at::Tensor distance = (query_pos - key_pos).view({1, 1, query_length, key_length});
  const at::Tensor in_window = distance < window;
  if (!mask.defined()) return at::logical_and(in_window, distance >= 0);  // causal within the window
  return at::logical_and(mask.to(device), in_window);
}

}  // namespace ferry
