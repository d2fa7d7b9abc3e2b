// The decoder backbone of every family (Hugging Face's `<Family>Model`, parameters under `model.` in
// a checkpoint): token embedding (times sqrt(hidden_size) where the family says so), decoder layers
// (decoder_layer.h), final RMSNorm. Returns hidden states; the heads (model_heads.h) turn them into
// logits or scalar scores.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <vector>

#include "core/config/model_shape.h"
#include "src/model/decoder_layer.h"
#include "src/model/rms_norm.h"
#include "src/model/rotary_embedding.h"

namespace ferry {

class KvCache;
class RouterLoad;

// Called for each decoder layer right after it is built and before the next one is, so a loader
// can replace a layer's full-precision weights (QLoRA quantises them, src/model/quantized_base.h) while
// only one layer's exist.
using LayerBuiltHook = std::function<void(DecoderLayerImpl& layer, int64_t index)>;

class DecoderModelImpl : public torch::nn::Module {
 public:
  explicit DecoderModelImpl(const ModelShape& config, const LayerBuiltHook& on_layer_built = {});

  // input_ids: (B, T) int64 token ids.
  // attention_mask: (B, T_past + T) 1/0 (int64 or bool), or undefined (no padding). Left padding
  //   is supported; with a cache it covers the cached tokens too. Or a ready bool mask
  //   (B|1, 1, T, T_past + T), true where a query may attend a key (packed samples, see
  //   data/token_batch.h), used as given; pass position_ids with it.
  // position_ids: (B, T) int64, or undefined: derived from a (B, T) attention_mask (cumsum, as
  //   transformers' generate does) or else T_past .. T_past + T - 1.
  // cache: optional; this forward's keys/values are appended to it and it advances by T.
  // Returns hidden states after the final norm: (B, T, C).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                        const torch::Tensor& position_ids = {}, KvCache* cache = nullptr);

  // One decode step at fixed shapes, as a CUDA graph replays it (src/generate/fixed_decode_step.h):
  // no checks and nothing read back to the host. input_ids, position_ids: (B, 1) int64; mask: bool
  // (B, 1, 1, K) over the K key columns the cache returns with its fixed slot set (kv_cache.h);
  // sliding_mask the same with the sliding window applied (undefined when no layer slides).
  // The cache is not advanced. Returns hidden states after the final norm: (B, 1, C).
  torch::Tensor forward_fixed(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                              const torch::Tensor& mask, const torch::Tensor& sliding_mask, KvCache& cache);

  // input_ids (B, T) int64 on the embedding's device -> (B, T, C): the embedding, scaled by
  // sqrt(hidden_size) in the weights' dtype where the family says so (Gemma).
  torch::Tensor embed(const torch::Tensor& input_ids);

  // The pieces of forward(), for callers that run the layers themselves (offload engine,
  // activation checkpointing): checks inputs and builds RoPE tables and the mask.
  LayerInputs layer_inputs(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                           const torch::Tensor& position_ids, const KvCache* cache, at::ScalarType dtype) const;

  const ModelShape& config() const { return config_; }
  // Where every sparse layer records its routing from now on (router_load.h); null: nowhere.
  void set_router_load(const std::shared_ptr<RouterLoad>& load);
  int64_t num_layers() const { return static_cast<int64_t>(decoder_layers.size()); }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  std::vector<DecoderLayer> decoder_layers;  // the same modules as `layers`, typed
  RMSNorm norm{nullptr};

 private:
  ModelShape config_;
  RotaryEmbedding rotary_;
  std::optional<RotaryEmbedding> sliding_rotary_;  // the sliding layers' own RoPE (Gemma 3's local base)
};
TORCH_MODULE(DecoderModel);

}  // namespace ferry
