// Preallocated KV cache.
#include "src/model/kv_cache.h"

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include "core/error.h"

namespace ferry {

KvCache::KvCache(const ModelShape& config, int64_t batch_size, int64_t max_length, at::ScalarType dtype,
                 c10::Device device)
    : batch_size_(batch_size), capacity_(max_length) {
  if (batch_size <= 0 || max_length <= 0) {
    throw UserError(detail::concat("KV cache: batch size and length must be positive, got ", batch_size, " and ", max_length));
  }
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    keys_.push_back(at::empty({batch_size, config.num_key_value_heads, max_length, config.head_dim}, options));
    values_.push_back(at::empty({batch_size, config.num_key_value_heads, max_length, config.head_dim}, options));
  }
}

std::pair<at::Tensor, at::Tensor> KvCache::append(int64_t layer, const at::Tensor& key, const at::Tensor& value) {
  FERRY_CHECK(layer >= 0 && layer < num_layers(), "KV cache has no layer ", layer);
  const int64_t tokens = key.size(2);
  if (length_ + tokens > capacity_) {
    throw UserError(detail::concat("KV cache is full: ", length_, " + ", tokens, " tokens exceed its capacity of ",
                                   capacity_, "; make the cache longer (prompt length + max new tokens)"));
  }
  if (fixed_slot_.defined()) {  // a fixed-shape decode step: the column is on the device
    const int64_t rows = key.size(0);
    FERRY_CHECK(tokens == 1 && rows <= allocated_rows(), "KV cache: a fixed-shape step takes one token of at most ",
                allocated_rows(), " rows, got ", rows, " x ", tokens);
    const at::Tensor keys = keys_[layer].narrow(0, 0, rows), values = values_[layer].narrow(0, 0, rows);
    keys.index_copy_(2, fixed_slot_, key);
    values.index_copy_(2, fixed_slot_, value);
    return {keys.narrow(2, 0, fixed_visible_), values.narrow(2, 0, fixed_visible_)};
  }
  FERRY_CHECK(key.size(0) == input_rows(), "KV cache expects ", input_rows(), " rows, got ", key.size(0));
  if (scatter_rows_.defined()) {  // a packed prefill: each token to its own row and column
    auto tokens_of = [&](const at::Tensor& packed) {  // (R, n_kv, W, D) -> (N, n_kv, D)
      return packed.transpose(1, 2).reshape({-1, packed.size(1), packed.size(3)}).index_select(0, scatter_index_);
    };
    using at::indexing::Slice;
    keys_[layer].index_put_({scatter_rows_, Slice(), scatter_columns_}, tokens_of(key));
    values_[layer].index_put_({scatter_rows_, Slice(), scatter_columns_}, tokens_of(value));
    return {key, value};
  }
  const at::Tensor keys = keys_[layer].narrow(0, 0, batch_size_), values = values_[layer].narrow(0, 0, batch_size_);
  keys.narrow(2, length_, tokens).copy_(key);
  values.narrow(2, length_, tokens).copy_(value);
  return {keys.narrow(2, 0, length_ + tokens), values.narrow(2, 0, length_ + tokens)};
}

KvCache KvCache::select_rows(const at::Tensor& rows) const {
  FERRY_CHECK(rows.dim() == 1 && rows.numel() > 0, "KV cache: select_rows needs a non-empty (N) index");
  KvCache out;
  out.batch_size_ = rows.numel();
  out.capacity_ = capacity_;
  out.length_ = length_;
  auto select = [&](const std::vector<at::Tensor>& from, std::vector<at::Tensor>& to) {
    for (const at::Tensor& buffer : from) {
      const at::Tensor index = rows.to(buffer.device(), at::kLong);
      std::vector<int64_t> shape = buffer.sizes().vec();
      shape[0] = out.batch_size_;
      at::Tensor selected = at::empty(shape, buffer.options());
      if (length_ > 0) selected.narrow(2, 0, length_).copy_(buffer.narrow(2, 0, length_).index_select(0, index));
      to.push_back(std::move(selected));
    }
  };
  select(keys_, out.keys_);
  select(values_, out.values_);
  return out;
}

void KvCache::compact_rows(const at::Tensor& keep) {
  FERRY_CHECK(keep.dim() == 1 && keep.numel() <= batch_size_,
              "KV cache: compact_rows needs an (N) index of at most ", batch_size_, " rows");
  const int64_t rows = keep.numel();
  if (length_ > 0 && rows > 0) {
    for (std::vector<at::Tensor>* buffers : {&keys_, &values_}) {
      for (at::Tensor& buffer : *buffers) {
        const at::Tensor stored = buffer.narrow(2, 0, length_);
        // Gathered first, then written: row i may take a row that an earlier i overwrites.
        stored.narrow(0, 0, rows).copy_(stored.index_select(0, keep.to(buffer.device(), at::kLong)));
      }
    }
  }
  batch_size_ = rows;
}

void KvCache::insert_rows(const KvCache& source, const at::Tensor& rows, int64_t column, bool zero_after) {
  const int64_t k = rows.numel(), span = source.length_, first = batch_size_;
  FERRY_CHECK(rows.dim() == 1 && k > 0 && first + k <= allocated_rows(), "KV cache: insert_rows of ", k,
              " rows after ", first, " exceeds the ", allocated_rows(), " allocated");
  FERRY_CHECK(span > 0 && span <= column && column <= length_ && source.num_layers() == num_layers(),
              "KV cache: insert_rows of ", span, " positions ending at column ", column, " of ", length_);
  const at::Tensor index = rows.to(keys_.front().device(), at::kLong);
  auto insert = [&](const at::Tensor& to, const at::Tensor& from) {
    const at::Tensor target = to.narrow(0, first, k);
    if (column > span) target.narrow(2, 0, column - span).zero_();
    target.narrow(2, column - span, span).copy_(from.narrow(2, 0, span).index_select(0, index));
    if (zero_after && column < capacity_) target.narrow(2, column, capacity_ - column).zero_();
  };
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    insert(keys_[layer], source.keys_[layer]);
    insert(values_[layer], source.values_[layer]);
  }
  batch_size_ = first + k;
}

void KvCache::drop_columns(int64_t count) {
  FERRY_CHECK(count >= 0 && count <= length_, "KV cache: cannot drop ", count, " of ", length_, " columns");
  if (count == 0) return;
  const int64_t kept = length_ - count;
  for (std::vector<at::Tensor>* buffers : {&keys_, &values_}) {
    for (at::Tensor& buffer : *buffers) {
      // Copied out first: the ranges overlap when more columns are kept than dropped.
      if (kept > 0) buffer.narrow(2, 0, kept).copy_(buffer.narrow(2, count, kept).clone());
    }
  }
  length_ = kept;
}

void KvCache::zero_unwritten() {
  if (length_ == capacity_) return;
  for (std::vector<at::Tensor>* buffers : {&keys_, &values_}) {
    for (at::Tensor& buffer : *buffers) buffer.narrow(2, length_, capacity_ - length_).zero_();
  }
}

void KvCache::set_fixed_slot(const at::Tensor& slot, int64_t visible) {
  FERRY_CHECK(slot.numel() == 1 && visible >= 1 && visible <= capacity_, "KV cache: bad fixed slot");
  fixed_slot_ = slot;
  fixed_visible_ = visible;
}

void KvCache::advance(int64_t tokens) {
  FERRY_CHECK(length_ + tokens <= capacity_, "KV cache advanced past its capacity");
  length_ += tokens;
  scatter_index_ = scatter_rows_ = scatter_columns_ = at::Tensor();
}

void KvCache::scatter_next(const at::Tensor& token_index, const at::Tensor& rows, const at::Tensor& columns,
                           int64_t packed_rows, int64_t width) {
  FERRY_CHECK(length_ == 0, "KV cache: a packed prefill needs an empty cache");
  FERRY_CHECK(width <= capacity_ && token_index.numel() == rows.numel() && rows.numel() == columns.numel(),
              "KV cache: bad packed prefill layout");
  for (at::Tensor& buffer : keys_) buffer.narrow(2, 0, width).zero_();
  for (at::Tensor& buffer : values_) buffer.narrow(2, 0, width).zero_();
  const auto device = keys_.empty() ? at::Device(at::kCPU) : keys_.front().device();
  scatter_index_ = token_index.to(device, at::kLong);
  scatter_rows_ = rows.to(device, at::kLong);
  scatter_columns_ = columns.to(device, at::kLong);
  packed_rows_ = packed_rows;
}

}  // namespace ferry
