// ParameterEngine: the one owner of where trainable parameters, their gradients and their optimizer
// state live, and of the optimizer step. The training loop (train) never moves tensors between
// tiers and never touches optimizer state; it asks the engine.
//
// Vocabulary
//   model   a named network the engine holds ("policy", "critic", "reference", "reward"). PPO keeps
//           four under one budget; SFT/RM/DPO keep one (DPO's reference may be a second, frozen one).
//   group   the parameters one unit of execution uses, in execution order: "embed" (token
//           embedding), "layers.<i>" (one decoder layer, LoRA adapters of that layer included),
//           "head" (final norm + LM/score head). A group is what `params` pages as one chunk and
//           what activation checkpointing recomputes as one block.
//
// Life of an optimizer step (the loop's calls, in order):
//   zero_grad()
//   for each micro-batch:  (before the last one: begin_last_backward(), see below)
//                          forward + backward through BackboneRunner (train/backbone_runner.h),
//                          which calls before_group / after_group around every group's forward,
//                          and with activation checkpointing around each decoder layer's
//                          recomputation in backward (the only backward hooks: `params` requires
//                          checkpointing; `optimizer` streams gradients from per-parameter hooks)
//   finish_gradients()          all gradients of this step are where step() reads them
//   gradients_finite(), gradient_norm()      loss-scale check, clipping (global L2 over models)
//   step(lr, grad_multiplier)   AdamW; grad_multiplier = (1 / loss_scale) * clip_coefficient
//
// How the policies fit these calls
//   none       (PlainEngine, plain_engine.h) parameters, gradients, fp32 master weights (bf16/fp16
//              runs) and Adam moments all live where the model lives; hooks are no-ops;
//              step() runs CpuAdamW (kernels/cpu/adamw.h) on CPU tensors and at::_fused_adamw_ on
//              CUDA tensors.
//   optimizer  (ZeRO-Offload) master weights and moments live in pinned host memory. A hook on each
//              parameter's gradient accumulator (registered in add_model) copies the gradient to a
//              pinned host buffer on a side stream as soon as backward produces it, and the device
//              gradient is freed; after_group(backward) records the group's copy event.
//              finish_gradients() waits on the events; gradient_norm()/gradients_finite() read the
//              host copies; step() runs CpuAdamW writing the new bf16 weights into pinned buffers and
//              copies them back to the device parameters.
//   params     (ZeRO-Infinity / Gemini) weights also live on the host in chunks (one per group, or
//              offload.chunk_size). before_group(forward) pages the group's chunk in (and prefetches
//              the next `offload.prefetch` groups on a side stream); after_group(forward) releases
//              it. Activations are checkpointed per group, so backward re-runs a group's forward:
//              before_group(backward) pages the chunk in again, after_group(backward) streams its
//              gradients out (as `optimizer`) and releases the chunk. The runner always calls the
//              hooks; only the engine decides what they do.
//   auto       the planner (offload/planner*) picks the policy, which chunks stay on the device
//              and which layers recompute their activations, from the budget.
//
// optimizer, params and auto are one engine (ChunkedEngine, chunked_engine.h): every model's
// parameters become views into chunk buffers (one per group, or offload.chunk_size), each chunk
// has an authoritative host copy, and a device copy while resident. `optimizer` keeps every chunk
// resident; `params` pages all of them; `auto` keeps the chunks the plan keeps.
//
// Paged groups are recomputed: the runner asks needs_recompute() and runs such a group (the
// embedding and the head too) as a checkpointed function, so no autograd graph holds a paged
// chunk's tensors between the group's forward and its backward.
//
// PPO phases name the models they need with make_resident(): generation {"policy"}; scoring
// {"policy", "reference", "reward", "critic"}; learning {"policy", "critic"}. Under `none` every
// model stays resident and make_resident() only checks the names.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "kernels/cpu/adamw.h"
#include "offload/accountant.h"
#include "offload/activation_meter.h"
#include "offload/activation_offload.h"
#include "src/dist/shard_group.h"

namespace ferry::offload {

// The parameters of one group, by Hugging Face name, as the model holds them.
struct ParameterGroup {
  std::string name;  // "embed", "layers.3", "head"
  std::vector<std::pair<std::string, torch::Tensor>> parameters;
  // Other groups whose parameters this group's forward reads as well: the head of a model with
  // tied embeddings reads "embed". Paging policies make those resident with it.
  std::vector<std::string> also_uses = {};
};

// Decoupled weight decay applies to weight matrices, not to norms and biases (by name and rank).
bool takes_weight_decay(const std::string& name, const torch::Tensor& parameter);

// Groups a model's parameters as described above, by name: `*embed_tokens.*` -> "embed",
// `*layers.<i>.*` -> "layers.<i>", everything else -> "head". Only parameters that require grad
// are listed when `trainable_only`. A tied embedding appears once, in "embed". Without
// `trainable_only`, QLoRA's quantised base weights (the buffers of Nf4Weight and Int8Weight
// modules: `...q_proj.nf4.packed`, `.absmax`, `.nested_absmax`; `...q_proj.int8.cb`, `.scb`) are
// listed with their layer too: frozen weights the engine places and pages like any other.
std::vector<ParameterGroup> group_parameters(const torch::nn::Module& model, bool trainable_only);

enum class GroupPass { forward, backward };

// Where a hook is: model name and group index in execution order: 0 the embedding, 1 + i decoder
// layer i, num_layers + 1 the head (whether or not the group has trainable parameters).
struct GroupRef {
  const std::string* model = nullptr;
  int64_t index = 0;
};

// Bytes held per tier, for the progress display and `ferry plan`'s check against the budget.
struct EngineMemoryReport {
  struct Line {
    std::string what;  // "weights", "gradients", "master weights", "adam moments"
    std::string tier;  // "cpu", "cuda:0", "pinned host"
    uint64_t bytes = 0;
  };
  std::vector<Line> lines;
  uint64_t bytes_on(const std::string& tier) const;
  std::string summary() const;  // one line per entry, human units
};

// AdamW hyperparameters the engine applies, the precision of the model's weights, and placement.
struct EngineOptions {
  OffloadPolicy policy = OffloadPolicy::none;
  Precision precision = Precision::fp32;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t cpu_threads = 0;  // CpuAdamW threads (0: the default pool)
  uint64_t device_budget = 0;  // offload.gpu_memory in bytes (0: no cap); what the engine may hold
  uint64_t host_budget = 0;    // offload.host_memory resolved (core/host_memory.h; 0: no cap)
  // offload.optimizer_state: the host Adam moments in fp32 or 8 bits (kernels/cpu/adamw_int8.h;
  // the offloading engines only).
  OptimizerState optimizer_state = OptimizerState::fp32;
  // offload.master_weights: fp32 master weights, the bf16 weights plus a bf16 compensation
  // (kernels/cpu/adamw_kahan.h), or the bf16 weights alone with stochastic rounding seeded by
  // rounding_seed (train.seed; kernels/cpu/adamw_stochastic.h). The offloading engines, bf16
  // parameters only.
  MasterWeights master_weights = MasterWeights::fp32;
  uint64_t rounding_seed = 0;
  // offload.optimizer_state_tier nvme: the CPU optimizer's state in a working file under nvme_dir
  // (offload/nvme_state_store.h), at most nvme_budget bytes (0: 90% of the free space), streamed in
  // windows of nvme_window parameters (ChunkedEngine only).
  StateTier optimizer_state_tier = StateTier::host;
  // offload.params_tier nvme: the chunks' host copies in a mapped working file under nvme_dir
  // (offload/mapped_chunk_file.h; ChunkedEngine only).
  StateTier params_tier = StateTier::host;
  std::string nvme_dir;
  uint64_t nvme_budget = 0;
  int64_t nvme_window = int64_t{1} << 20;
  uint64_t chunk_size = 0;     // offload.chunk_size (0: one chunk per group)
  int64_t prefetch = 1;        // offload.prefetch: groups paged in ahead of the one running
  // Where the models compute. add_model takes parameters on this device or on the CPU and places
  // them itself (a model bigger than the GPU is built on the host and never moved whole); unset:
  // wherever the first model's parameters are.
  std::optional<c10::Device> device;
  // Groups ("embed", "layers.3", "head") whose chunks stay resident under `params`; the planner's
  // choice under `auto`, empty for plain `params` (every chunk paged).
  std::vector<std::string> kept_groups;
  // Decoder layers whose activations are recomputed in backward besides what
  // train.gradient_checkpointing asks (the planner's choice under `auto`).
  std::vector<int64_t> recompute_layers;
  // train.activation_offload, or the planner's choice under `auto`: the inputs of recomputed
  // decoder layers wait in host memory between forward and backward (activation_offload()).
  bool activation_offload = false;
  // Data parallelism (src/dist): the processes whose gradients reduce_gradients() sums, and what
  // is sharded over them (distributed.zero_stage, src/dist/shard_group.h): 0 nothing; 1 the
  // optimizer state and update, each process updating the units it owns and broadcasting their
  // new weights; 2 also the summed gradients (each unit's are reduced onto its owner only); 3
  // also the host copies of the weights (ChunkedEngine only; with_weights is then collective).
  // Null for one process. The group outlives the engine (the process's communicator).
  dist::ShardGroup* shard_group = nullptr;
  int64_t zero_stage = 0;

  // Whether recompute_layers asks for the group (GroupRef index 1 + layer).
  bool recomputes_layer_group(int64_t group_index) const;
  // The AdamW settings of a model's update number `step` (1-based); weight_decay is set per
  // parameter (takes_weight_decay).
  kernels::AdamWParams adamw_params(double learning_rate, int64_t step) const;

  static EngineOptions from_config(const Config& config);
};

class ParameterEngine {
 public:
  virtual ~ParameterEngine() = default;

  // Registers a model's groups (group_parameters(model, false): all of them, frozen ones too, since
  // paging policies move those as well). `trainable`: the engine keeps gradients and optimizer
  // state for its parameters that require grad (false for a reference or reward model; LoRA freezes
  // the base weights by requires_grad). Names are unique. Parameters may be on the CPU: the engine
  // moves them to EngineOptions::device as its policy says (all of them under `none`, the resident
  // chunks otherwise); move the model's buffers with `model->to(device)` afterwards (a no-op for
  // the parameters).
  virtual void add_model(const std::string& name, std::vector<ParameterGroup> groups, bool trainable) = 0;

  // The models the next phase uses; the others may be moved out of device memory.
  virtual void make_resident(const std::vector<std::string>& models) = 0;

  // Called by the runner around each group's forward and backward (see the file comment).
  virtual void before_group(const GroupRef& group, GroupPass pass) = 0;
  virtual void after_group(const GroupRef& group, GroupPass pass) = 0;

  // Called once after the last backward of an optimizer step.
  virtual void finish_gradients() = 0;

  // Data parallelism (EngineOptions::shard_group): after finish_gradients(), sums the gradients of
  // every trainable parameter of every model (zero where no backward reached it) over the
  // processes: all of them on every process, or under zero_stage 2 each unit's on its owner, the
  // others dropping theirs. gradient_norm() and step() then use the sums (the norm adds up the
  // owners' parts). A no-op without a group.
  virtual void reduce_gradients() = 0;

  // Global L2 norm of all gradients of the trainable models in `models` (empty: all), as stored
  // (that is, still multiplied by the loss scale), accumulated in double.
  virtual double gradient_norm(const std::vector<std::string>& models = {}) = 0;
  virtual bool gradients_finite(const std::vector<std::string>& models = {}) = 0;

  // One AdamW update of the trainable models in `models` (empty: all) with gradients multiplied by
  // `grad_multiplier`. Decoupled weight decay is not applied to norms and biases (1-D parameters).
  virtual void step(double learning_rate, double grad_multiplier, const std::vector<std::string>& models = {}) = 0;
  virtual void zero_grad(const std::vector<std::string>& models = {}) = 0;

  // offload.overlap_step: whether this engine can apply the step during the last backward.
  virtual bool overlaps_step() const { return false; }
  // Called before the last micro-batch's forward of every step. The engine may then finish the
  // gradients of the chunks backward has completed (host copies, norms) while backward goes on.
  // With a learning rate — a step whose update is known in advance (offload.overlap_step: no
  // clipping, no loss scaling, grad_multiplier 1) — it also updates those chunks with AdamW
  // there; the step then ends with finish_gradients() and step(learning_rate, 1), which update
  // what is left. Gradients are never changed, so gradient_norm() stays what it was. A chunk
  // whose gradients are not finite is not updated, and neither is any chunk after it; chunks
  // updated before it keep their update.
  virtual void begin_last_backward(std::optional<double> /*learning_rate*/) {}

  // Updates done so far for `model` (Adam's bias-correction step count).
  virtual int64_t step_count(const std::string& model) const = 0;

  // Optimizer state (fp32 master weights if any, Adam moments, step counts) of every trainable
  // model into / from `dir`. Loading checks every name and shape first (InputError naming the file).
  // The model weights themselves are the caller's (a Hugging Face folder beside it). Under
  // zero_stage >= 1 every process saves the state it owns as its shard file into the same `dir`
  // (offload/optimizer_state_file.h), and loads what it owns from whichever file holds it: a
  // checkpoint resumes at any process count.
  virtual void save_state(const std::filesystem::path& dir) const = 0;
  virtual void load_state(const std::filesystem::path& dir) = 0;

  // Runs `fn` while the model's parameters hold its current weights where `fn` can read (read) or
  // overwrite (write) them: paged parameters point at their host copies for the duration. After
  // a write, master weights and resident device copies follow the new values. Saving and
  // loading checkpoints go through this, never through the parameters directly.
  enum class WeightAccess { read, write };
  virtual void with_weights(const std::string& model, WeightAccess access, const std::function<void()>& fn) = 0;
  // Calls `fn` with the name and tensor of each trainable parameter of the model (one that
  // requires grad), in the engine's fixed order. Call it inside with_weights: the tensors are then
  // the current weights, and writes to them under WeightAccess::write are kept.
  virtual void for_each_trainable(const std::string& model,
                                  const std::function<void(const std::string&, const torch::Tensor&)>& fn) = 0;

  // True when the group's parameters are paged out between its forward and its backward, so the
  // runner must recompute the group's forward in backward (between before_group/after_group
  // (backward)) instead of keeping activations that reference the parameters.
  virtual bool needs_recompute(const GroupRef& group) const = 0;

  virtual EngineMemoryReport memory_report() const = 0;
  // Resident bytes per tier and category as the engine counts them (weights, gradients, master
  // weights, moments, staging buffers; activations are not the engine's and are not counted).
  virtual const MemoryAccountant& accountant() const = 0;
  // On the emulated device tier (a CPU run): a meter that counts everything a step allocates on
  // this thread besides the engine's own tensors as device activations in accountant(), for as long
  // as it lives (offload/activation_meter.h). Null on a GPU, whose caching allocator measures it.
  virtual std::unique_ptr<ActivationMeter> meter_activations() = 0;
  // Where the runner offloads the inputs of recomputed decoder layers (offload/activation_offload.h),
  // counting them in accountant()'s host tier; null unless EngineOptions::activation_offload.
  virtual ActivationOffloader* activation_offloader() = 0;
  // Peaks restart from the current values (PPO reports its phases' peaks one by one).
  virtual void reset_memory_peaks() = 0;
};

// The engine for options.policy: `none` is PlainEngine, `optimizer`, `params` and `auto` are
// ChunkedEngine (`auto` is resolved into one of those first: offload/auto_policy.h).
std::unique_ptr<ParameterEngine> make_parameter_engine(const EngineOptions& options);

}  // namespace ferry::offload
