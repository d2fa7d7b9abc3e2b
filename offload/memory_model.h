// MemoryModel: the bytes a training run needs in each tier (device, host), per category, before
// the run starts. A pure function of the model shape (ModelShape), the precision, micro-batch,
// sequence length, LoRA rank and the placement choices (policy, which chunks stay on the device,
// which layers recompute their activations). The planner searches over those choices with it;
// `ferry plan` prints its table; the accountant measures the same table at run time.
//
// The formulas are written out in docs/offload.md ("The memory model"); in short, with P the
// parameter count, T the trainable count (P for full fine-tuning), w the weight width (2 bytes in
// bf16/fp16, 4 in fp32):
// (QLoRA: the base's projections take ~0.52 byte per weight instead of w, plus one dequantisation
// buffer on the device; BaseFormat below)
//   none       device: P·w weights + T·w grads + T·4 master (mixed precision only) + T·8 moments
//   optimizer  device: P·w weights + two chunks of streamed gradients;
//              host: T·4 master + T·8 moments + T·w grads (T·4 when accumulating micro-batches)
//                    + T·w weight staging (the CPU optimizer's output, copied back)
//   params     device: kept chunks + the (1 + prefetch) paged chunks in flight + two chunks of
//              streamed gradients; host: every chunk (P·w) + master + moments + grads as above
// plus, on the device, activations (per token per layer; a checkpointed layer keeps only its
// input, and one layer is recomputed at a time; with activation offload those inputs wait on the
// host and the device holds two at a time), the logits' loss tensors and a fixed overhead (CUDA
// context, library workspaces, allocator slack).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config/config_enum.h"
#include "core/config/model_shape.h"
#include "offload/accountant_categories.h"
#include "offload/chunk_layout.h"

namespace ferry::offload {

// How the optimizer keeps its state: Adam moments in fp32 (8 bytes per trainable parameter) or
// block-wise int8 (kernels/cpu/adamw_int8.h: 1 byte each plus an fp32 scale per block of 256);
// master weights in fp32 (4 bytes, mixed precision only) or as the bf16 weights plus a bf16 Kahan
// compensation buffer (2 more bytes) or as the bf16 weights alone with stochastic rounding (no
// more bytes), as the engine keeps them (offload.optimizer_state,
// offload.master_weights).
enum class MomentFormat { fp32, int8 };
enum class MasterFormat { fp32, bf16_kahan, bf16_stochastic };

// How the frozen base's decoder-layer projections are stored (lora.quantize_base, lora.double_quant):
// in the compute dtype, or in bitsandbytes' NF4 (kernels/cpu/nf4.h) — half a byte per weight plus an
// fp32 scale per block of 64, or, double-quantised, an 8-bit scale per block plus an fp32 one per 256
// blocks (~0.516 byte per weight); or int8 (kernels/ops/int8.h): a byte per weight plus an fp32
// scale per output row; or, for a GGUF model (lora.quantize_base gguf), each projection as its file
// stores it (TrainingShape::stored_base_bytes: Q4_1 0.625 bytes per weight, Q4_K 0.5625, ...).
// Embeddings, norms and the head stay in the compute dtype. Each projection is dequantised into a
// compute-dtype buffer for its matmul, one at a time.
enum class BaseFormat { compute_dtype, nf4, nf4_double_quant, int8, gguf };

// `tensors` with every decoder-layer projection weight (`model.layers.<i>.*_proj.weight`) replaced
// by its quantised parts as bitsandbytes names them: NF4's packed codes under the weight's own name
// (uint8, ceil(n / 2)), then `<name>.absmax` and, double-quantised, `<name>.nested_absmax`; int8's
// codes under the weight's name (n bytes) and the row scales as `<module>.SCB`; gguf's packed blocks
// under the weight's name, `stored` bytes of them (a projection `stored` lacks keeps the compute dtype).
std::vector<TensorSpec> quantize_base_tensors(std::vector<TensorSpec> tensors, BaseFormat format,
                                              const ModelShape& config,
                                              const std::map<std::string, uint64_t>& stored = {});

// The format lora.quantize_base and lora.double_quant ask for.
BaseFormat base_format(BaseQuantization quantize_base, bool double_quant);

// What the memory model needs to know about a run, besides the placement choices.
struct TrainingShape {
  ModelShape model;
  Precision precision = Precision::bf16;
  int64_t seq_len = 512;            // data.max_length: the planner sizes for full-length batches
  int64_t grad_accumulation = 1;    // > 1: host gradients accumulate in fp32 under `params`
  int64_t lora_rank = 0;            // 0: full fine-tuning
  std::vector<std::string> lora_targets{"q_proj", "k_proj", "v_proj", "o_proj"};
  double lora_dropout = 0.0;        // > 0: each adapter saves its dropped input and mask
  bool overlap_step = false;        // offload.overlap_step: CPU AdamW during the last backward
  int64_t logits_chunk = -1;        // train.logits_chunk: rows of logits at a time (-1 auto, 0 all)
  MomentFormat moments = MomentFormat::fp32;
  MasterFormat master = MasterFormat::fp32;
  BaseFormat base = BaseFormat::compute_dtype;  // NF4 / int8 / gguf (QLoRA) needs lora_rank > 0
  // BaseFormat::gguf: the bytes of each projection the GGUF keeps in ggml blocks, by weight name
  // (quantized_base.h's gguf_projection_bytes); the others (F32 / F16 / BF16 in the file) are float.
  std::map<std::string, uint64_t> stored_base_bytes;
  // Data parallelism: the estimate is one process's. With distributed.zero_stage >= 1 it holds
  // 1/processes of the master weights and moments, at stage 3 (offloading policies) also of the
  // weights' host copies (the engines balance owners by bytes; the estimate rounds up).
  int64_t processes = 1;
  int64_t zero_stage = 0;
  // offload.optimizer_state_tier nvme (offloading policies): the master weights and moments live in
  // the NVMe tier's file; the host holds its staging ring (offload/nvme_state_store.h).
  bool state_on_nvme = false;
  // offload.params_tier nvme: the host copies of the weights live in the NVMe tier's mapped file.
  bool weights_on_nvme = false;
};

struct MemoryModelConstants {
  // CUDA context (~300-500 MiB with lazy module loading), cuBLAS/cuDNN workspaces and caching
  // allocator slack. Not measured yet: a planner estimate.
  uint64_t device_overhead_bytes = 768ull << 20;
  uint64_t chunk_size = 0;  // offload.chunk_size (0: one chunk per block)
  int64_t prefetch = 1;     // offload.prefetch: paged chunks loaded ahead of the one in use
  uint64_t alignment = 256;
};

// One point of the planner's search: where things go and what is recomputed.
struct PlacementChoice {
  OffloadPolicy policy = OffloadPolicy::none;  // none, optimizer or params (never auto)
  int64_t micro_batch_size = 1;
  // Per chunk of MemoryModel::layout(): stays on the device (true) or is paged from the host.
  // Only read under `params`; the other policies keep every chunk. Empty: page all (params).
  std::vector<bool> chunk_on_device;
  // Per decoder layer: recompute its activations in backward (activation checkpointing).
  // Empty: no layer is checkpointed.
  std::vector<bool> layer_checkpointed;
  // train.activation_offload: the checkpointed layers' inputs wait in host memory between forward
  // and backward (offload/activation_offload.h); the device holds at most two of them.
  bool activation_offload = false;
};

struct MemoryEstimate {
  TierCategoryBytes bytes;
  uint64_t device_total() const { return bytes.tier_total(MemoryTier::device); }
  uint64_t host_total() const { return bytes.tier_total(MemoryTier::host); }
};

class MemoryModel {
 public:
  MemoryModel(TrainingShape shape, MemoryModelConstants constants = {});

  MemoryEstimate estimate(const PlacementChoice& choice) const;

  const TrainingShape& shape() const { return shape_; }
  const MemoryModelConstants& constants() const { return constants_; }
  // The base weights' chunks, in the compute dtype.
  const ChunkLayout& layout() const { return layout_; }

  int64_t weight_bytes() const { return weight_bytes_; }  // bytes per weight/grad/activation element
  int64_t base_parameters() const { return base_params_; }       // the model's own weights
  // Bytes of the model's own weights as stored (tensors without chunk padding): base_parameters()
  // × weight_bytes(), less what NF4 saves.
  uint64_t base_weight_bytes() const { return base_weight_bytes_; }
  int64_t quantized_parameters() const { return quantized_params_; }  // weights stored in NF4 / int8
  uint64_t quantized_bytes() const { return quantized_bytes_; }       // their bytes (codes + scales)
  // The compute-dtype buffer the largest quantised projection is dequantised into (0 without).
  uint64_t dequantize_buffer_bytes() const { return dequantize_buffer_bytes_; }
  int64_t trainable_parameters() const;                           // base (full) or LoRA adapters
  int64_t lora_parameters_per_layer() const { return lora_params_per_layer_; }
  // Trainable parameters held by one chunk (its base parameters for full fine-tuning, the
  // adapters of its layers under LoRA).
  int64_t chunk_trainable_parameters(size_t chunk) const;
  // Optimizer state for n trainable parameters in the shape's formats.
  uint64_t moment_bytes(uint64_t n) const;
  uint64_t master_bytes(uint64_t n) const;  // 0 in fp32 training: the weights are the master copy
  // Gradient bytes of the chunk with the most trainable parameters: one gradient staging buffer.
  uint64_t largest_trainable_chunk_bytes() const;
  // The largest trainable tensor (a LoRA adapter's under LoRA): the size of each of the engine's
  // gradient staging slots on a GPU (offload/chunked_engine.h).
  uint64_t largest_trainable_tensor_bytes() const;

  // Activation bytes per token (micro-batch 1, one position), parts of the formula in the docs.
  uint64_t layer_activation_bytes_per_token() const;        // one layer, not checkpointed
  uint64_t checkpointed_layer_bytes_per_token() const;      // one layer's saved input
  uint64_t head_activation_bytes_per_token() const;         // final norm + logits + loss, unchunked
  // The head's bytes for `tokens` tokens: the final norm's per token, and the logits of every
  // token (logits_chunk 0) or of one chunk of rows (kernels/ops/chunked_lm_head.h).
  uint64_t head_activation_bytes(int64_t tokens) const;
  int64_t logits_rows(int64_t tokens) const;  // rows of logits alive at once
  uint64_t backward_workspace_bytes_per_token() const;      // gradients in flight in backward
  // Device bytes of activations at the step's peak; with activation_offload, the checkpointed
  // layers' inputs are on the host but for the two in flight.
  uint64_t activation_bytes(int64_t micro_batch_size, const std::vector<bool>& layer_checkpointed,
                            bool activation_offload = false) const;
  // Host bytes of offloaded activations: every checkpointed layer's input (0 without offload).
  uint64_t offloaded_activation_bytes(int64_t micro_batch_size, const std::vector<bool>& layer_checkpointed,
                                      bool activation_offload) const;

 private:
  TrainingShape shape_;
  MemoryModelConstants constants_;
  ChunkLayout layout_;
  int64_t weight_bytes_ = 2;
  int64_t base_params_ = 0;
  uint64_t base_weight_bytes_ = 0;
  int64_t quantized_params_ = 0;
  uint64_t quantized_bytes_ = 0;
  uint64_t dequantize_buffer_bytes_ = 0;
  int64_t lora_params_per_layer_ = 0;
  std::vector<int64_t> chunk_params_;        // base parameters per chunk
  std::vector<int64_t> chunk_lora_params_;   // LoRA adapter parameters per chunk
};

// The bytes per element of weights, gradients and activations under `precision`.
int64_t compute_dtype_bytes(Precision precision);

// LoRA adapter parameters of one decoder layer: rank × (in + out) for each targeted projection.
// Throws ConfigError for an unknown target name.
int64_t lora_parameters_per_layer(const ModelShape& config, int64_t rank, const std::vector<std::string>& targets);
// The input widths of one decoder layer's targeted projections, summed (what LoRA dropout copies).
int64_t lora_input_width_per_layer(const ModelShape& config, const std::vector<std::string>& targets);

}  // namespace ferry::offload
