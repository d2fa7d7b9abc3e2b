// MemoryModel: bytes per tier and category for a placement choice (formulas in docs/offload.md).
#include "offload/memory_model.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/nf4.h"
#include "kernels/ops/logits_chunk.h"

namespace ferry::offload {
namespace {

uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

// Largest sum of `window` consecutive entries of `sizes` (all of them when fewer).
uint64_t largest_window_sum(const std::vector<uint64_t>& sizes, int64_t window) {
  uint64_t best = 0;
  for (size_t start = 0; start < sizes.size(); ++start) {
    uint64_t sum = 0;
    for (size_t i = start; i < sizes.size() && i < start + static_cast<size_t>(window); ++i) sum += sizes[i];
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace

namespace {

// A quantised base (NF4, int8, GGUF blocks) holds every decoder projection this way, Mixtral's
// experts' w1/w2/w3 included; not a Mixture of Experts' router (mlp.gate), which stays as it is.
bool quantized_projection(const std::string& name) {
  if (name.rfind("model.layers.", 0) != 0) return false;
  if (name.ends_with("_proj.weight")) return true;
  return name.find(".experts.") != std::string::npos &&
         (name.ends_with(".w1.weight") || name.ends_with(".w2.weight") || name.ends_with(".w3.weight"));
}

}  // namespace

int64_t compute_dtype_bytes(Precision precision) { return precision == Precision::fp32 ? 4 : 2; }

namespace {

// (in, out) of a decoder layer's projection, from the family's tensor list; ConfigError for a name
// that is not one of its LoRA targets.
std::pair<int64_t, int64_t> projection_shape(const ModelShape& config, const std::string& target) {
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (const ModelTensor& t : layer_tensors(config, layer)) {
      if (t.lora_target == target) return {t.shape[1], t.shape[0]};
    }
    if (!config.has_experts() || config.moe.sparse_layers.empty()) break;  // the layers are alike
  }
  std::string known;
  for (const std::string& name : lora_targets(config)) known += (known.empty() ? "" : ", ") + name;
  throw ConfigError("lora.target_modules: unknown projection '" + target + "'; use " + known);
}

// Every projection of the layer with the most LoRA parameters (a sparse one: each expert's
// projections count) that `targets` adapt: (in, out) each.
std::vector<std::pair<int64_t, int64_t>> adapted_projections(const ModelShape& config,
                                                             const std::vector<std::string>& targets) {
  const std::vector<std::string> resolved = resolve_lora_targets(config, targets);
  const bool all_experts = std::find(resolved.begin(), resolved.end(), "experts") != resolved.end();
  std::vector<std::pair<int64_t, int64_t>> best;
  int64_t best_sum = -1;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t sum = 0;
    for (const ModelTensor& t : layer_tensors(config, layer)) {
      if (t.lora_target.empty() || t.shape.size() != 2) continue;
      const bool wanted = std::find(resolved.begin(), resolved.end(), t.lora_target) != resolved.end();
      if (!wanted && !(all_experts && t.expert >= 0)) continue;
      out.emplace_back(t.shape[1], t.shape[0]);
      sum += t.shape[0] + t.shape[1];
    }
    if (sum > best_sum) {
      best_sum = sum;
      best = std::move(out);
    }
    if (!config.has_experts() || config.moe.sparse_layers.empty()) break;  // the layers are alike
  }
  return best;
}

}  // namespace

int64_t lora_parameters_per_layer(const ModelShape& config, int64_t rank, const std::vector<std::string>& targets) {
  if (rank <= 0) return 0;
  int64_t sum = 0;
  for (const auto& [in, out] : adapted_projections(config, targets)) sum += rank * (in + out);  // A: rank × in, B: out × rank
  return sum;
}

int64_t lora_input_width_per_layer(const ModelShape& config, const std::vector<std::string>& targets) {
  int64_t sum = 0;
  for (const auto& [in, out] : adapted_projections(config, targets)) sum += in;
  return sum;
}

BaseFormat base_format(BaseQuantization quantize_base, bool double_quant) {
  switch (quantize_base) {
    case BaseQuantization::none: return BaseFormat::compute_dtype;
    case BaseQuantization::nf4: return double_quant ? BaseFormat::nf4_double_quant : BaseFormat::nf4;
    case BaseQuantization::int8: return BaseFormat::int8;
    case BaseQuantization::gguf: return BaseFormat::gguf;
  }
  return BaseFormat::compute_dtype;
}

std::vector<TensorSpec> quantize_base_tensors(std::vector<TensorSpec> tensors, BaseFormat format,
                                              const ModelShape& config, const std::map<std::string, uint64_t>& stored) {
  if (format == BaseFormat::compute_dtype) return tensors;
  const bool nested = format == BaseFormat::nf4_double_quant;
  std::vector<TensorSpec> out;
  out.reserve(tensors.size() * 3);
  for (TensorSpec& t : tensors) {
    const bool projection = quantized_projection(t.name);
    if (!projection) {
      out.push_back(std::move(t));
      continue;
    }
    if (format == BaseFormat::gguf) {  // the file's blocks, or the compute dtype where it stores floats
      const auto it = stored.find(t.name);
      if (it == stored.end()) {
        out.push_back(std::move(t));
      } else {
        out.push_back(TensorSpec{t.name, static_cast<int64_t>(it->second), 1, t.group, t.numel});
      }
      continue;
    }
    if (format == BaseFormat::int8) {  // codes, then one fp32 scale per output row
      const std::string module = t.name.substr(0, t.name.size() - 7);  // less ".weight"
      const int64_t rows = projection_shape(config, module.substr(module.rfind('.') + 1)).second;
      out.push_back(TensorSpec{t.name, t.numel, 1, t.group, t.numel});
      out.push_back(TensorSpec{module + ".SCB", rows, 4, t.group, 0});
      continue;
    }
    const int64_t blocks = kernels::nf4_blocks(t.numel, kernels::kNf4DefaultBlocksize);
    out.push_back(TensorSpec{t.name, kernels::nf4_packed_bytes(t.numel), 1, t.group, t.numel});
    out.push_back(TensorSpec{t.name + ".absmax", blocks, nested ? 1 : 4, t.group, 0});
    if (nested) {
      out.push_back(TensorSpec{t.name + ".nested_absmax", kernels::nf4_blocks(blocks, kernels::kNf4NestedBlocksize), 4,
                               t.group, 0});
    }
  }
  return out;
}

MemoryModel::MemoryModel(TrainingShape shape, MemoryModelConstants constants)
    : shape_(std::move(shape)), constants_(constants) {
  FERRY_CHECK(shape_.seq_len > 0 && shape_.grad_accumulation > 0, "seq_len ", shape_.seq_len,
              ", grad_accumulation ", shape_.grad_accumulation);
  FERRY_CHECK(constants_.prefetch >= 0, "prefetch ", constants_.prefetch);
  FERRY_CHECK(shape_.base == BaseFormat::compute_dtype || shape_.lora_rank > 0, "an NF4 base needs LoRA");
  weight_bytes_ = compute_dtype_bytes(shape_.precision);
  std::vector<TensorSpec> tensors = parameter_tensor_specs(shape_.model, weight_bytes_);
  for (const TensorSpec& t : tensors) {
    if (shape_.base != BaseFormat::compute_dtype && quantized_projection(t.name)) {
      dequantize_buffer_bytes_ = std::max(dequantize_buffer_bytes_, t.bytes());
    }
  }
  layout_ = ChunkLayout::build(quantize_base_tensors(std::move(tensors), shape_.base, shape_.model,
                                                     shape_.stored_base_bytes),
                               ChunkLayoutOptions{constants_.chunk_size, constants_.alignment});
  for (const TensorSpec& t : layout_.tensors()) {
    base_weight_bytes_ += t.bytes();
    if (t.weights >= 0) {
      quantized_params_ += t.weights;
      quantized_bytes_ += t.bytes();
    }
  }
  lora_params_per_layer_ = ::ferry::offload::lora_parameters_per_layer(shape_.model, shape_.lora_rank, shape_.lora_targets);
  chunk_params_.assign(layout_.chunks().size(), 0);
  chunk_lora_params_.assign(layout_.chunks().size(), 0);
  const int64_t num_layers = shape_.model.num_hidden_layers;
  for (size_t c = 0; c < layout_.chunks().size(); ++c) {
    std::vector<int64_t> layers_seen;
    for (size_t t : layout_.chunks()[c].tensors) {
      const TensorSpec& spec = layout_.tensors()[t];
      chunk_params_[c] += spec.weight_count();
      const int64_t layer = spec.group - 1;
      if (layer >= 0 && layer < num_layers && (layers_seen.empty() || layers_seen.back() != layer)) {
        layers_seen.push_back(layer);
      }
    }
    // A layer split over several chunks (a small chunk_size) has its adapters with its first chunk.
    for (int64_t layer : layers_seen) {
      const bool first = c == 0 || std::none_of(layout_.chunks()[c - 1].tensors.begin(),
                                                layout_.chunks()[c - 1].tensors.end(), [&](size_t t) {
                                                  return layout_.tensors()[t].group - 1 == layer;
                                                });
      if (first) chunk_lora_params_[c] += lora_params_per_layer_;
    }
    base_params_ += chunk_params_[c];
  }
}

uint64_t MemoryModel::largest_trainable_chunk_bytes() const {
  uint64_t largest = 0;
  for (size_t c = 0; c < layout_.chunks().size(); ++c) {
    largest = std::max(largest, u64(chunk_trainable_parameters(c) * weight_bytes_));
  }
  return largest;
}

uint64_t MemoryModel::largest_trainable_tensor_bytes() const {
  if (shape_.lora_rank > 0) {
    const ModelShape& m = shape_.model;
    const int64_t widest = std::max({m.hidden_size, m.intermediate_size, m.num_attention_heads * m.head_dim});
    return u64(shape_.lora_rank * widest) * weight_bytes_;
  }
  uint64_t largest = 0;
  for (const TensorSpec& t : layout_.tensors()) largest = std::max(largest, u64(t.numel) * weight_bytes_);
  return largest;
}

int64_t MemoryModel::trainable_parameters() const {
  return shape_.lora_rank > 0 ? lora_params_per_layer_ * shape_.model.num_hidden_layers : base_params_;
}

int64_t MemoryModel::chunk_trainable_parameters(size_t chunk) const {
  return shape_.lora_rank > 0 ? chunk_lora_params_.at(chunk) : chunk_params_.at(chunk);
}

namespace {

// What a layer's MLP keeps per token for backward, in elements: a dense MLP's gate, up, silu(gate)
// and silu(gate)*up (down_proj's input); a Mixture of Experts', for each of the experts_per_token
// experts a token runs, its gathered input, those four and the expert's output before and after
// its routing weight, plus the router's logits and probabilities (fp32: counted twice) and the
// shared expert's MLP (a sparse layer: the widest kind when layers differ).
int64_t feed_forward_elements(const ModelShape& m, int64_t inter) {
  if (!m.has_experts()) return 4 * inter;
  const MoeShape& moe = m.moe;
  const int64_t sparse = moe.experts_per_token * (3 * m.hidden_size + 4 * moe.expert_intermediate_size) +
                         3 * moe.num_experts + 4 * moe.shared_expert_intermediate_size;
  return std::max(sparse, moe.sparse_layers.empty() ? int64_t{0} : 4 * inter);
}

}  // namespace

uint64_t MemoryModel::layer_activation_bytes_per_token() const {
  const ModelShape& m = shape_.model;
  const int64_t h = m.hidden_size, inter = m.intermediate_size;
  const int64_t q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  const int64_t lora_targets =
      shape_.lora_rank > 0 ? static_cast<int64_t>(resolve_lora_targets(m, shape_.lora_targets).size()) : 0;
  const int64_t elements = 2 * h                 // input_layernorm: its input and its output
                           + q + 2 * kv          // q, k (after RoPE) and v, saved by attention
                           + (m.qk_norm != QkNorm::none ? q + kv : 0)  // q and k before their norms (Qwen3, Gemma 3, OLMo 2)
                           + q                   // attention output (o_proj's input)
                           + 2 * h               // post_attention_layernorm: input and output
                           + feed_forward_elements(m, inter)
                           + shape_.lora_rank * lora_targets;  // each adapter's rank-wide middle
  // LoRA dropout: each adapter keeps its dropped input for lora_A's backward, and the mask (bool).
  const int64_t dropped = shape_.lora_rank > 0 && shape_.lora_dropout > 0
                              ? lora_input_width_per_layer(m, shape_.lora_targets) * (weight_bytes_ + 1)
                              : 0;
  return u64(elements * weight_bytes_ + dropped + 4 * m.num_attention_heads);  // + attention's fp32 logsumexp per head
}

uint64_t MemoryModel::checkpointed_layer_bytes_per_token() const {
  return u64(shape_.model.hidden_size * weight_bytes_);
}

uint64_t MemoryModel::head_activation_bytes_per_token() const {
  const ModelShape& m = shape_.model;
  // The final norm's input and output, then the logits in the compute dtype (when it is not fp32)
  // and three fp32 tensors of their size at the peak, in backward: the log-softmax (saved), the
  // gradient arriving at it and the gradient it passes on (measured by the activation meter:
  // tests/unit/train_activation_memory_test.cpp).
  const int64_t logits_width = 3 * 4 + (weight_bytes_ == 4 ? 0 : weight_bytes_);
  return u64(2 * m.hidden_size * weight_bytes_ + m.vocab_size * logits_width);
}

int64_t MemoryModel::logits_rows(int64_t tokens) const {
  const ModelShape& m = shape_.model;
  if (shape_.logits_chunk == 0) return tokens;
  const int64_t chunk = shape_.logits_chunk > 0 ? shape_.logits_chunk
                                                 : kernels::auto_logits_chunk(tokens, m.vocab_size, m.hidden_size);
  return std::min(tokens, chunk);
}

uint64_t MemoryModel::head_activation_bytes(int64_t tokens) const {
  const ModelShape& m = shape_.model;
  const uint64_t logits = head_activation_bytes_per_token() - u64(2 * m.hidden_size * weight_bytes_);
  return u64(2 * m.hidden_size * weight_bytes_) * u64(tokens) + logits * u64(logits_rows(tokens));
}

uint64_t MemoryModel::backward_workspace_bytes_per_token() const {
  const ModelShape& m = shape_.model;
  // The hidden-state gradient and the residual branch's, plus the gradients of gate and up.
  return u64((2 * m.hidden_size + 2 * m.intermediate_size) * weight_bytes_);
}

namespace {

int64_t count_checkpointed(const std::vector<bool>& layer_checkpointed, int64_t num_layers) {
  FERRY_CHECK(layer_checkpointed.empty() || static_cast<int64_t>(layer_checkpointed.size()) == num_layers,
              "layer_checkpointed has ", layer_checkpointed.size(), " entries for ", num_layers, " layers");
  return static_cast<int64_t>(std::count(layer_checkpointed.begin(), layer_checkpointed.end(), true));
}

// Checkpointed inputs on the device at once under activation offload: the layer being recomputed
// and the one being brought back (in forward: the layer's input and its output, the next input).
constexpr int64_t kOffloadedInputsOnDevice = 2;

}  // namespace

uint64_t MemoryModel::activation_bytes(int64_t micro_batch_size, const std::vector<bool>& layer_checkpointed,
                                       bool activation_offload) const {
  const int64_t num_layers = shape_.model.num_hidden_layers;
  const int64_t checkpointed = count_checkpointed(layer_checkpointed, num_layers);
  const int64_t inputs_on_device =
      activation_offload ? std::min(checkpointed, kOffloadedInputsOnDevice) : checkpointed;
  const uint64_t full = layer_activation_bytes_per_token();
  const uint64_t saved =
      u64(num_layers - checkpointed) * full + u64(inputs_on_device) * checkpointed_layer_bytes_per_token();
  // Peak: everything saved, plus the larger of the loss's tensors (end of forward) and one
  // recomputed layer (backward), plus the gradients in flight.
  const uint64_t recompute = checkpointed > 0 ? full : 0;
  const int64_t tokens = micro_batch_size * shape_.seq_len;
  return (saved + backward_workspace_bytes_per_token()) * u64(tokens) +
         std::max(head_activation_bytes(tokens), recompute * u64(tokens));
}

uint64_t MemoryModel::offloaded_activation_bytes(int64_t micro_batch_size, const std::vector<bool>& layer_checkpointed,
                                                 bool activation_offload) const {
  if (!activation_offload) return 0;
  const int64_t checkpointed = count_checkpointed(layer_checkpointed, shape_.model.num_hidden_layers);
  return u64(checkpointed) * checkpointed_layer_bytes_per_token() * u64(micro_batch_size * shape_.seq_len);
}

uint64_t MemoryModel::moment_bytes(uint64_t n) const {
  if (shape_.moments == MomentFormat::int8) return u64(kernels::int8_moment_bytes(static_cast<int64_t>(n)));
  return 8 * n;
}

uint64_t MemoryModel::master_bytes(uint64_t n) const {
  if (weight_bytes_ == 4) return 0;
  switch (shape_.master) {
    case MasterFormat::fp32: return 4 * n;
    case MasterFormat::bf16_kahan: return 2 * n;
    case MasterFormat::bf16_stochastic: return 0;  // the bf16 weights are the master
  }
  return 4 * n;
}

MemoryEstimate MemoryModel::estimate(const PlacementChoice& choice) const {
  FERRY_CHECK(choice.policy != OffloadPolicy::auto_, "the memory model needs a concrete policy");
  FERRY_CHECK(choice.micro_batch_size > 0, "micro_batch_size ", choice.micro_batch_size);
  const size_t num_chunks = layout_.chunks().size();
  FERRY_CHECK(choice.chunk_on_device.empty() || choice.chunk_on_device.size() == num_chunks,
              "chunk_on_device has ", choice.chunk_on_device.size(), " entries for ", num_chunks, " chunks");

  const uint64_t w = u64(weight_bytes_);
  const bool mixed = weight_bytes_ != 4;
  const bool lora = shape_.lora_rank > 0;
  const uint64_t trainable = u64(trainable_parameters());
  const uint64_t adapters = lora ? trainable : 0;  // extra weights beyond the base model

  MemoryEstimate e;
  auto& b = e.bytes;
  using C = MemoryCategory;
  constexpr MemoryTier D = MemoryTier::device, H = MemoryTier::host;

  switch (choice.policy) {
    case OffloadPolicy::none:
      b.at(D, C::weights) = base_weight_bytes_ + adapters * w;
      b.at(D, C::grads) = trainable * w;
      b.at(D, C::master) = master_bytes(trainable);  // in fp32 the weights are the master copy
      b.at(D, C::moments) = moment_bytes(trainable);
      break;
    case OffloadPolicy::optimizer:
      b.at(D, C::weights) = base_weight_bytes_ + adapters * w;
      // Gradients stream to pinned host buffers as backward produces them and the device copy is
      // freed: at most two chunks' worth are in flight (one being produced, one being copied).
      b.at(D, C::grads) = std::min(trainable * w, 2 * largest_trainable_chunk_bytes());
      b.at(H, C::master) = mixed ? master_bytes(trainable) : trainable * 4;
      b.at(H, C::moments) = moment_bytes(trainable);
      // The fp32 sums the CPU optimizer reads, and the ring of 4 gradient staging slots (GPU).
      b.at(H, C::grads) = trainable * 4 + 4 * largest_trainable_tensor_bytes();
      b.at(H, C::weights) = trainable * w;  // pinned output of the CPU optimizer, copied back
      break;
    case OffloadPolicy::params: {
      uint64_t kept = 0;
      std::vector<uint64_t> paged;  // sizes of paged chunks in execution order
      for (size_t c = 0; c < num_chunks; ++c) {
        const bool on_device = !choice.chunk_on_device.empty() && choice.chunk_on_device[c];
        if (on_device) kept += layout_.chunks()[c].bytes;
        else paged.push_back(layout_.chunks()[c].bytes);
      }
      // Tied embeddings: the LM head uses the embedding's chunk again at the end of forward (and
      // first in backward), so it is in flight next to the last chunks too.
      const bool embedding_paged = num_chunks > 0 && (choice.chunk_on_device.empty() || !choice.chunk_on_device[0]);
      if (shape_.model.tie_word_embeddings && embedding_paged && num_chunks > 1) paged.push_back(layout_.chunks()[0].bytes);
      const uint64_t in_flight = paged.empty() ? 0 : largest_window_sum(paged, 1 + constants_.prefetch);
      b.at(D, C::weights) = kept + in_flight + adapters * w;
      // Gradients stream to the host as under `optimizer`: two chunks' worth in flight.
      b.at(D, C::grads) = std::min(trainable * w, 2 * largest_trainable_chunk_bytes());
      b.at(H, C::weights) = layout_.total_bytes() + adapters * w;  // every chunk's home (Adam writes there)
      b.at(H, C::master) = mixed ? master_bytes(trainable) : trainable * 4;
      b.at(H, C::moments) = moment_bytes(trainable);
      b.at(H, C::grads) = trainable * 4 + 4 * largest_trainable_tensor_bytes();
      break;
    }
    case OffloadPolicy::auto_: break;
  }
  if (shape_.processes > 1 && shape_.zero_stage >= 1) {  // this process's share (ZeRO)
    const uint64_t n = u64(shape_.processes);
    const auto share = [n](uint64_t bytes) { return (bytes + n - 1) / n; };
    for (MemoryTier tier : {D, H}) {
      b.at(tier, C::master) = share(b.at(tier, C::master));
      b.at(tier, C::moments) = share(b.at(tier, C::moments));
    }
    if (shape_.zero_stage >= 3 && choice.policy != OffloadPolicy::none) b.at(H, C::weights) = share(b.at(H, C::weights));
  }
  if (shape_.state_on_nvme && choice.policy != OffloadPolicy::none) {
    constexpr MemoryTier N = MemoryTier::nvme;
    const uint64_t state = b.at(H, C::master) + b.at(H, C::moments);
    b.at(N, C::master) = b.at(H, C::master);
    b.at(N, C::moments) = b.at(H, C::moments);
    b.at(H, C::master) = 0;
    // The staging ring: 4 records of a window of up to 2^20 parameters (EngineOptions::nvme_window).
    const uint64_t per_param = trainable > 0 ? (state + trainable - 1) / trainable : 0;
    b.at(H, C::moments) = 4 * per_param * std::min<uint64_t>(trainable, uint64_t{1} << 20);
  }
  if (shape_.weights_on_nvme && choice.policy != OffloadPolicy::none) {
    b.at(MemoryTier::nvme, C::weights) = b.at(H, C::weights);
    b.at(H, C::weights) = 0;
  }
  b.at(D, C::activations) =
      activation_bytes(choice.micro_batch_size, choice.layer_checkpointed, choice.activation_offload);
  b.at(H, C::activations) =
      offloaded_activation_bytes(choice.micro_batch_size, choice.layer_checkpointed, choice.activation_offload);
  b.at(D, C::buffers) = constants_.device_overhead_bytes + dequantize_buffer_bytes_;
  return e;
}

}  // namespace ferry::offload
