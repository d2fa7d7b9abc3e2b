// The fixed-shape decode step and its CUDA graphs (see fixed_decode_step.h).
#include "src/generate/fixed_decode_step.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "src/model/kv_cache.h"

#ifdef FERRY_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ferry {

struct FixedDecodeStep::Graph {
#ifdef FERRY_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  at::Tensor logits;  // (bucket, V): what each replay writes
};

FixedDecodeStep::FixedDecodeStep(CausalLMImpl& model, KvCache& cache, const at::Tensor& prompt_mask,
                                 bool use_graphs, bool bucket_shapes)
    : model_(model), cache_(cache), bucket_shapes_(bucket_shapes), alive_(cache.batch_size()) {
  const at::Tensor weight = model.model->embed_tokens->weight;
  const auto device = weight.device();
#ifdef FERRY_WITH_CUDA
  // A Mixture of Experts reads its per-expert token counts back to the host every layer (one GEMM
  // per active expert), which a captured graph cannot: its decode steps run eagerly.
  use_graphs_ = use_graphs && device.is_cuda() && !model.config().has_experts();
#else
  use_graphs_ = false;
  (void)use_graphs;
#endif
  const int64_t rows = cache.allocated_rows(), prompt = prompt_mask.size(1);
  FERRY_CHECK(prompt_mask.size(0) == alive_ && cache.length() == prompt && alive_ == rows,
              "fixed decode step: the cache must hold the prefilled prompts, one row each");
  const auto index = at::TensorOptions().dtype(at::kLong).device(device);
  tokens_ = at::zeros({rows, 1}, index);
  positions_ = (prompt_mask.to(device, at::kLong).sum(1, true) - 1);  // each row's last prompt token
  visible_ = at::zeros({rows, cache.capacity()}, index.dtype(at::kBool));
  visible_.narrow(1, 0, prompt).copy_(prompt_mask.to(device).to(at::kBool));
  const ModelShape& config = model.model->config();
  if (config.every_layer_slides()) {
    window_in_visible_ = config.sliding_window;
  } else if (config.any_layer_slides()) {
    sliding_visible_ = at::zeros_like(visible_);
  }
  slot_ = at::zeros({1}, index);
  if (use_graphs_ || bucket_shapes_) cache.zero_unwritten();  // such a step reads every column
}

FixedDecodeStep::~FixedDecodeStep() { cache_.clear_fixed_slot(); }

at::Tensor FixedDecodeStep::step(const at::Tensor& tokens) {
  const int64_t n = tokens.numel();
  FERRY_CHECK(n == alive_, "fixed decode step: ", n, " tokens for ", alive_, " alive rows");
  const int64_t column = cache_.length();
  tokens_.narrow(0, 0, n).copy_(tokens.reshape({n, 1}));
  positions_.narrow(0, 0, n).add_(1);
  slot_.fill_(column);
  visible_.narrow(0, 0, n).select(1, column).fill_(true);
  // The sliding window: the query at `column` sees keys column - window + 1 .. column only
  // (attention_mask.h's apply_sliding_window, which the prefill's mask went through). Every layer
  // sliding (Mistral): in visible_ itself; some (Gemma): in a copy for the sliding layers.
  if (sliding_visible_.defined()) {
    const int64_t window = model_.model->config().sliding_window;
    sliding_visible_.copy_(visible_);
    if (column - window >= 0) sliding_visible_.narrow(0, 0, n).narrow(1, 0, column - window + 1).fill_(false);
  } else if (window_in_visible_ > 0 && column - window_in_visible_ >= 0) {
    visible_.narrow(0, 0, n).narrow(1, 0, column - window_in_visible_ + 1).fill_(false);
  }
  at::Tensor logits = use_graphs_ ? replay(n) : at::Tensor();
  if (!logits.defined()) {
    logits = bucket_shapes_ ? run(bucket(n), cache_.capacity()).narrow(0, 0, n) : run(n, column + 1);
  }
  cache_.advance(1);
  return logits;
}

at::Tensor FixedDecodeStep::run(int64_t rows, int64_t columns) {
  // No autograd bookkeeping per op: the weights of a policy being trained require gradients.
  c10::InferenceMode inference;
  cache_.set_fixed_slot(slot_, columns);
  const at::Tensor mask = visible_.narrow(0, 0, rows).narrow(1, 0, columns).unsqueeze(1).unsqueeze(1);  // (b, 1, 1, K)
  const at::Tensor sliding_mask =
      sliding_visible_.defined() ? sliding_visible_.narrow(0, 0, rows).narrow(1, 0, columns).unsqueeze(1).unsqueeze(1)
                                 : mask;
  const at::Tensor hidden = model_.model->forward_fixed(tokens_.narrow(0, 0, rows), positions_.narrow(0, 0, rows), mask,
                                                        sliding_mask, cache_);
  cache_.clear_fixed_slot();
  return model_.logits(hidden.squeeze(1)).to(at::kFloat);  // (b, V)
}

int64_t FixedDecodeStep::bucket(int64_t rows) const {
  int64_t size = 1;
  while (size < rows) size *= 2;
  return std::min(size, cache_.allocated_rows());
}

at::Tensor FixedDecodeStep::replay(int64_t rows) {
#ifdef FERRY_WITH_CUDA
  const int64_t size = bucket(rows);
  auto found = graphs_.find(size);
  if (found == graphs_.end()) {
    auto graph = std::make_unique<Graph>();
    const int64_t columns = cache_.capacity();
    try {
      c10::cuda::device_synchronize();
      c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
      {
        c10::cuda::CUDAStreamGuard on_side(side);  // capture cannot run on the default stream
        run(size, columns);                          // warm-up: lazy state is made before capture
        graph->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);  // other threads may use CUDA meanwhile
        graph->logits = run(size, columns);
        graph->graph.capture_end();
      }
      c10::cuda::device_synchronize();
    } catch (const std::exception& e) {
      std::cerr << "warning: CUDA graph capture of the decode step failed (" << e.what()
                << "); decoding without graphs\n";
      cache_.clear_fixed_slot();
      use_graphs_ = false;
      return {};
    }
    found = graphs_.emplace(size, std::move(graph)).first;
  }
  found->second->graph.replay();
  return found->second->logits.narrow(0, 0, rows).clone();
#else
  (void)rows;
  return {};
#endif
}

void FixedDecodeStep::keep_rows(const at::Tensor& keep) {
  const int64_t n = keep.numel();
  FERRY_CHECK(n <= alive_, "fixed decode step: keep_rows needs at most ", alive_, " rows");
  const at::Tensor index = keep.to(tokens_.device(), at::kLong);
  cache_.compact_rows(index);
  if (n == 0) {
    alive_ = 0;
    return;
  }
  for (at::Tensor* buffer : {&positions_, &visible_}) {
    const at::Tensor alive = buffer->narrow(0, 0, alive_);
    buffer->narrow(0, 0, n).copy_(alive.index_select(0, index));
  }
  alive_ = n;
}

void FixedDecodeStep::admit_rows(const KvCache& prompts, const at::Tensor& rows, const at::Tensor& prompt_mask) {
  const int64_t k = rows.numel(), span = prompt_mask.size(1), column = cache_.length();
  FERRY_CHECK(cache_.batch_size() == alive_ && prompt_mask.size(0) == k && span == prompts.length(),
              "fixed decode step: admit_rows needs a (", k, ", ", prompts.length(), ") prompt mask");
  cache_.insert_rows(prompts, rows, column, use_graphs_ || bucket_shapes_);
  const at::Tensor mask = prompt_mask.to(positions_.device(), at::kLong);
  positions_.narrow(0, alive_, k).copy_(mask.sum(1, true) - 1);
  const at::Tensor visible = visible_.narrow(0, alive_, k);
  visible.fill_(false);
  visible.narrow(1, column - span, span).copy_(mask.to(at::kBool));
  alive_ += k;
}

int64_t FixedDecodeStep::drop_unseen_columns(int64_t at_most) {
  const int64_t length = cache_.length();
  const at::Tensor seen = visible_.narrow(0, 0, alive_).narrow(1, 0, length).any(0);  // (length) bool
  const int64_t first_seen = seen.any().item<bool>() ? seen.to(at::kByte).argmax().item<int64_t>() : length;
  const int64_t count = std::min(first_seen, at_most);
  if (count <= 0) return 0;
  cache_.drop_columns(count);
  const int64_t kept = length - count;
  if (kept > 0) visible_.narrow(1, 0, kept).copy_(visible_.narrow(1, count, kept).clone());
  visible_.narrow(1, kept, visible_.size(1) - kept).fill_(false);
  return count;
}

}  // namespace ferry
