// The decode step of generation at fixed shapes and addresses, so that on CUDA it can be captured
// once per batch-size bucket as a CUDA graph and replayed: a per-token loop of ~15 small kernels per
// layer is otherwise bound by kernel launches, not by the GPU.
//
// Everything a step reads lives in buffers allocated once: the last tokens and their positions
// (B, 1), which key columns each row may attend (B, capacity) bool, the KV cache (in place: rows
// that stop are compacted within the same buffers, KvCache::compact_rows) and the column this
// step's keys and values go to ((1) int64 on the device: KvCache::set_fixed_slot). The step itself
// (DecoderModelImpl::forward_fixed, then the LM head) reads nothing back to the host.
//
// Rows may also join mid-way (continuous batching: admit_rows) with their prompts' keys ending at
// the current column, so rows' columns start at different places; each row's mask and positions
// are its own, and columns that no row attends any more can be dropped (drop_unseen_columns).
//
// Without graphs (the CPU, or generation.cuda_graphs off) the same step runs eagerly over exactly
// the alive rows and the columns written so far; a graph runs the bucket's rows (the alive rows
// then rows left over from finished ones, whose results are dropped) over every column of the
// cache (the mask hides the unwritten ones). Each row's logits are the same computation either way.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>

#include "src/model/model_heads.h"

namespace ferry {

class KvCache;

class FixedDecodeStep {
 public:
  // After the prefill: `cache` holds the prompts' keys and values (B rows, length P);
  // prompt_mask (B, P) 1/0. use_graphs: capture and replay CUDA graphs (CUDA models only; ignored
  // elsewhere, and dropped for the rest of the generation if a capture fails).
  // bucket_shapes: run the shapes a graph runs (bucket rows, every cache column) eagerly where no
  // graph is captured — what tests check the graphs' inputs against on the CPU.
  FixedDecodeStep(CausalLMImpl& model, KvCache& cache, const at::Tensor& prompt_mask, bool use_graphs,
                  bool bucket_shapes = false);
  ~FixedDecodeStep();

  // tokens: (n) int64, the token each alive row chose last. Returns the next logits (n, V) fp32.
  at::Tensor step(const at::Tensor& tokens);
  // Keeps the alive rows `keep` ((n') int64 ascending indices into the n alive rows; n' may be 0).
  void keep_rows(const at::Tensor& keep);
  // Adds k rows after the alive ones, in buffer rows the cache has allocated: row i's prompt is row
  // rows[i] ((k) int64) of `prompts` (a prefill's cache, L positions, L <= the cache's length), with
  // prompt_mask (k, L) 1/0, left-padded. Its keys end at the current column; the next step() takes
  // n + k tokens, the new rows' last.
  void admit_rows(const KvCache& prompts, const at::Tensor& rows, const at::Tensor& prompt_mask);
  // Drops the leading columns that no alive row attends, at most `at_most` of them (the cache's
  // length shrinks by as many; positions are unchanged). Returns how many were dropped.
  int64_t drop_unseen_columns(int64_t at_most);
  int64_t alive() const { return alive_; }

 private:
  struct Graph;
  // The step for the first `rows` buffer rows over key columns [0, columns): (rows, V) fp32.
  at::Tensor run(int64_t rows, int64_t columns);
  at::Tensor replay(int64_t rows);  // through the bucket's graph (captured on first use)
  int64_t bucket(int64_t rows) const;  // a power of two, at most the cache's rows

  CausalLMImpl& model_;
  KvCache& cache_;
  bool use_graphs_;
  bool bucket_shapes_;
  int64_t alive_;
  at::Tensor tokens_;     // (B, 1) int64
  at::Tensor positions_;  // (B, 1) int64: the position of each row's last token
  at::Tensor visible_;    // (B, capacity) bool: key columns each row may attend
  // (B, capacity) bool: the same within the sliding window, for the sliding layers of a model that
  // mixes them with full ones (Gemma, OLMo 3); undefined otherwise (a model whose every layer
  // slides, Mistral, narrows visible_ itself).
  at::Tensor sliding_visible_;
  int64_t window_in_visible_ = 0;  // > 0: every layer slides (Mistral) and visible_ itself keeps this window
  at::Tensor slot_;       // (1) int64: the column this step writes
  std::map<int64_t, std::unique_ptr<Graph>> graphs_;  // by bucket (rows)
};

}  // namespace ferry
