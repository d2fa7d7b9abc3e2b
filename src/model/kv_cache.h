// Key/value cache for incremental decoding: per layer one preallocated key and one value buffer
// of (B, n_kv_heads, T_max, head_dim), filled left to right. All rows share one length (prompts
// are left-padded to a common length; padding is masked, not skipped).
//
// Protocol: during one model forward every layer calls append() with that step's keys/values;
// the model then calls advance() with the step's token count. select_rows() makes a cache of some
// of the rows (in any order, repeats allowed): generation shares a prompt's cache among its copies;
// compact_rows() drops the rows that have finished, in place (the buffers keep their addresses, as
// a captured CUDA graph needs); insert_rows() adds prefilled rows after them (continuous batching:
// a row's keys then start at a later column than its neighbours', which the decode step's
// per-row mask and positions allow) and drop_columns() frees the columns no row attends any more.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry {

class KvCache {
 public:
  KvCache() = default;
  KvCache(const ModelShape& config, int64_t batch_size, int64_t max_length, at::ScalarType dtype, c10::Device device);

  int64_t length() const { return length_; }    // tokens stored so far
  int64_t capacity() const { return capacity_; }
  int64_t batch_size() const { return batch_size_; }
  // Rows the next forward's input has: batch_size(), or the packed rows of a scatter_next prefill.
  int64_t input_rows() const { return scatter_rows_.defined() ? packed_rows_ : batch_size_; }
  int64_t num_layers() const { return static_cast<int64_t>(keys_.size()); }
  // Rows the buffers hold: batch_size() or more, after compact_rows.
  int64_t allocated_rows() const { return keys_.empty() ? 0 : keys_.front().size(0); }

  // key/value: (B, n_kv, T, D) for positions [length, length + T) of `layer`. Returns views of the
  // layer's keys and values for positions [0, length + T). Throws UserError when the cache is full.
  std::pair<at::Tensor, at::Tensor> append(int64_t layer, const at::Tensor& key, const at::Tensor& value);

  // Marks `tokens` more positions as stored (after every layer has appended them).
  void advance(int64_t tokens);

  // A packed prefill (src/generate/packed_prefill.h) into an empty cache: the next forward's input
  // is `packed_rows` rows of `width` columns whose tokens `token_index` ((N) flat indices into
  // packed_rows * width) belong at (rows, columns) ((N) each) of the cache. Positions [0, width) are
  // zeroed; append() then stores each token's key and value at its slot and returns the packed
  // keys and values themselves (the prefill attends within its packed rows); advance(width) ends it.
  void scatter_next(const at::Tensor& token_index, const at::Tensor& rows, const at::Tensor& columns,
                    int64_t packed_rows, int64_t width);

  // Forgets the contents (buffers are kept for reuse).
  void reset() { length_ = 0; }

  // A cache of the same capacity and length holding rows `rows` ((N) int64, on any device) of this
  // one: row i of the result is row rows[i] here. Copies only the positions stored so far.
  KvCache select_rows(const at::Tensor& rows) const;

  // Keeps rows `keep` ((N) int64 ascending, on any device; N may be 0): row i becomes row keep[i],
  // moved within the same buffers; batch_size() becomes N. Copies only the positions stored so far.
  void compact_rows(const at::Tensor& keep);

  // Appends rows `rows` ((k) int64 on any device, repeats allowed) of `source` (a prefill's cache:
  // positions [0, L)) as rows [batch_size(), batch_size() + k) of this one, at columns
  // [column - L, column) (column <= length()); their columns before that are zeroed (they are
  // masked, and must hold finite numbers), and with zero_after so are those from `column` on (a
  // CUDA graph's step reads every column). batch_size() grows by k, within allocated_rows().
  void insert_rows(const KvCache& source, const at::Tensor& rows, int64_t column, bool zero_after);

  // Moves every allocated row's positions [count, length()) to [0, length() - count) in the same
  // buffers and shortens length() by `count`: the first `count` columns must be masked for every row.
  void drop_columns(int64_t count);

  // Zeroes positions [length(), capacity()) of every allocated row: a step over every column (a
  // CUDA graph's) then reads finite numbers (masked) where nothing was written yet.
  void zero_unwritten();

  // Fixed-shape decoding (src/generate/fixed_decode_step.h, which CUDA graphs replay): while a slot
  // is set, append() takes a one-token step of the first key.size(0) rows (up to allocated_rows(),
  // which may be more than batch_size()), writes its keys and values at column `slot` ((1) int64 on
  // the cache's device: read there, never on the host) and returns columns [0, visible) of those
  // rows; the caller masks the columns that hold nothing. advance() keeps the slot.
  void set_fixed_slot(const at::Tensor& slot, int64_t visible);
  void clear_fixed_slot() { fixed_slot_ = at::Tensor(); }

 private:
  std::vector<at::Tensor> keys_;    // per layer (B, n_kv, T_max, D)
  std::vector<at::Tensor> values_;  // per layer (B, n_kv, T_max, D)
  int64_t batch_size_ = 0;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  at::Tensor scatter_index_, scatter_rows_, scatter_columns_;  // set between scatter_next and advance
  int64_t packed_rows_ = 0;
  at::Tensor fixed_slot_;  // set between set_fixed_slot and clear_fixed_slot
  int64_t fixed_visible_ = 0;
};

}  // namespace ferry
