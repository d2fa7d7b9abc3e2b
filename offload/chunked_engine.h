// ChunkedEngine: offload policies `optimizer` (ZeRO-Offload), `params` (paged weights) and the
// plans `auto` makes between them, as one engine.
//
// Every model's parameters are packed into chunks (offload/chunk_layout.h: one per group, or
// offload.chunk_size) and become views into a chunk buffer. Each chunk has
//   a host copy   (pinned on a GPU machine): the authoritative weights in the model's dtype, which
//                 the CPU optimizer writes and checkpoints read;
//   a device copy while resident: what the model computes with. A resident chunk is never written
//                 on the device, so paging out is just freeing it.
// A parameter whose chunk is not resident holds an empty placeholder of its dtype on the device:
// a forward that forgot to page it in fails loudly instead of computing with stale data.
//
// Which chunks are resident:
//   kept chunks   (every chunk under `optimizer`, offload.kept_groups under `params` / `auto`)
//                 stay resident from add_model on;
//   paged chunks  are paged in by before_group (waiting for the copy) with the next
//                 offload.prefetch groups in the pass's direction started on the side stream, and
//                 released by after_group unless one of those upcoming groups uses them;
//   make_resident({names}) pages every chunk of the named models in and every chunk of the
//                 others out (PPO's phases); make_resident({}) returns to the policy's placement.
//
// Data parallelism with ZeRO (EngineOptions::shard_group, src/dist/shard_group.h): each chunk has
// an owning process. Stage 1 and 2: only the owner holds the master weights and moments of the
// chunk's trainable parameters, updates them and broadcasts the chunk's new host bytes. Stage 3:
// only the owner holds the chunk's host copy at all; every page-in is a broadcast from it into
// the others' device buffers, a step broadcasts the updated resident chunks, and with_weights
// gathers the model into temporary host buffers — all of them collective calls.
//
// Gradients never stay on the device: a post-accumulate-grad hook on every trainable parameter
// (registered in add_model) starts the copy of the fresh gradient to a host staging buffer on the
// side stream and frees the device gradient; copies are folded into an fp32 host accumulator
// (before the staging buffer is reused, and in finish_gradients). The staging buffers are a ring
// of kStagingSlots slots, each as large as the largest trainable tensor, shared by all
// parameters: a slot's previous copy is folded in before the slot takes the next one, so the host
// holds 4 bytes per trainable parameter plus the ring, not a staging copy of the whole model. Norm, finiteness and AdamW
// (CpuAdamW, kernels/cpu/adamw.h) run on the host accumulators, fp32 master weights (the host
// chunk itself for fp32 models) and moments; the new weights land in the host chunk, and resident
// chunks are copied back to the device, one copy per chunk.
//
// The last backward of a step (begin_last_backward): the chunks whose gradients are complete go
// to a background thread (offload/background_worker.h) that drains their gradients and takes
// their norms while backward goes on, and with offload.overlap_step runs CpuAdamW on them. A
// chunk is complete once a gradient arrives of a parameter only a group before all the groups
// using the chunk uses: backward through a model runs its groups strictly from the head down,
// one after the other. That holds for one forward per micro-batch; a model run forward twice
// (perhaps with a backward call each) is finished after backward instead. Resident device
// copies are refreshed in step(), after backward's kernels.
//
// Device and host bytes go through the accountant; a page-in that would exceed offload.gpu_memory
// is a ConfigError that names the budget and what needed it. Without a GPU the device tier is
// emulated in host memory: the same calls, synchronous copies, the same accounting.
//
// The engine owns the models' parameter storage for its lifetime: read or replace weights through
// with_weights (checkpoints do).
//
// offload.optimizer_state_tier nvme: the trainable parameters' optimizer state is not in host memory
// but in an NvmeStateStore (offload/nvme_state_store.h): a chunk's update streams its parameters'
// state windows from the file and back through a few staging buffers while the CPU AdamW runs,
// checkpoints are written and read window by window, and a write of the weights marks the stored
// masters stale. Everything else (weights, gradients, paging) is as above.
//
// offload.params_tier nvme: each model's host chunks are ranges of a MappedChunkFile
// (offload/mapped_chunk_file.h) instead of host buffers; every use of a chunk's host bytes (its
// page-in, its AdamW update and copy back, with_weights, checkpoints, add_model's placement) is
// followed by release_host, which drops its pages from the process. On a GPU the page-in then
// waits for its copy (the mapping is not pinned memory).
//
// Its parts: chunked_engine.cpp (add_model's steps: layout, ZeRO ownership, host buffers),
// chunked_engine_paging.cpp (residency, page-in/out, with_weights), chunked_engine_step.cpp
// (gradient hooks, accumulation, the overlapped last backward, reduction, norm, AdamW) and
// chunked_engine_state.cpp (optimizer state in checkpoints). Each trainable parameter's host
// optimizer state (master, moments, the CPU AdamW call) is an offload/host_adam_state.h, as in
// PlainEngine.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>

#include "offload/background_worker.h"
#include "offload/chunk_layout.h"
#include "offload/engine.h"
#include "offload/host_adam_state.h"
#include "offload/optimizer_state_file.h"
#include "offload/transfer_streams.h"

namespace ferry::kernels {
class ThreadPool;
}

namespace ferry::offload {
class MappedChunkFile;
class NvmeStateStore;
}

namespace ferry::offload {

class ChunkedEngine : public ParameterEngine {
 public:
  explicit ChunkedEngine(const EngineOptions& options);
  ~ChunkedEngine() override;

  void add_model(const std::string& name, std::vector<ParameterGroup> groups, bool trainable) override;
  void make_resident(const std::vector<std::string>& models) override;
  void before_group(const GroupRef& group, GroupPass pass) override;
  void after_group(const GroupRef& group, GroupPass pass) override;
  void finish_gradients() override;
  void reduce_gradients() override;
  double gradient_norm(const std::vector<std::string>& models = {}) override;
  bool gradients_finite(const std::vector<std::string>& models = {}) override;
  void step(double learning_rate, double grad_multiplier, const std::vector<std::string>& models = {}) override;
  void zero_grad(const std::vector<std::string>& models = {}) override;
  bool overlaps_step() const override { return true; }
  void begin_last_backward(std::optional<double> learning_rate) override;
  int64_t step_count(const std::string& model) const override;
  void save_state(const std::filesystem::path& dir) const override;
  void load_state(const std::filesystem::path& dir) override;
  void with_weights(const std::string& model, WeightAccess access, const std::function<void()>& fn) override;
  void for_each_trainable(const std::string& model,
                          const std::function<void(const std::string&, const torch::Tensor&)>& fn) override;
  bool needs_recompute(const GroupRef& group) const override;
  EngineMemoryReport memory_report() const override;
  const MemoryAccountant& accountant() const override { return accountant_; }
  void reset_memory_peaks() override { accountant_.reset_peaks(); }
  std::unique_ptr<ActivationMeter> meter_activations() override;
  ActivationOffloader* activation_offloader() override { return offloader_.get(); }

  struct Param {
    std::string name;
    torch::Tensor parameter;    // the model's tensor: a view of its device chunk, or the placeholder
    torch::Tensor host_view;    // the same tensor's bytes in the host chunk
    torch::Tensor placeholder;  // empty, the parameter's dtype, on the device
    int64_t chunk = 0;
    // GroupRef index of the only group that uses the parameter; -1 when other groups use it too
    // (a tied embedding): its gradient's arrival then says nothing about where backward is.
    int64_t only_group = -1;
    uint64_t offset = 0;
    bool trainable = false;
    bool decay = true;          // false for norms and biases
    // Trainable and held here (ZeRO: the chunk's owner): master weights (aliasing host_view for fp32
    // models) and moments on the host.
    HostAdamState state;
    int64_t nvme_index = -1;    // the NVMe tier holds the state instead: its index in the store
    torch::Tensor grad;         // accumulated over the step's micro-batches
    bool has_grad = false;
    torch::Tensor staging;      // GPU only: the gradient's landing buffer (a ring slot), in its dtype
    Transfer grad_copy;  // GPU only: the staging copy in flight
    bool grad_copy_pending = false;
    torch::Tensor norm;         // L2 norm of `grad` (double), once taken by the overlapped step
  };

  // Called by the gradient hook of a trainable parameter (public for the hook only).
  void receive_gradient(const std::string& model, Param& p);

  // Chunks whose gradients (and, overlapped, update) were finished during a backward, over all
  // steps (tests).
  int64_t chunks_finished_during_backward() const { return chunks_during_backward_; }

  // How many chunks a model has and how many are resident now (tests, progress display).
  int64_t chunk_count(const std::string& model) const;
  int64_t resident_chunk_count(const std::string& model) const;

 private:
  // The host bytes add_model will hold for a model: its chunks and, per trainable tensor, moments,
  // gradient accumulator, fp32 master and staging; a ConfigError naming offload.host_memory when
  // they do not fit beside what is held.
  // `state_held`: per tensor, whether this process holds its optimizer state (ZeRO: it owns it).
  uint64_t host_bytes_needed(uint64_t chunk_bytes, const std::vector<torch::Tensor>& tensors, bool trainable,
                             const std::vector<bool>& state_held) const;
  void check_host_budget(const std::string& model, uint64_t needed) const;
  struct Chunk;
  struct Model;
  // add_model's steps, in order: the layout (every parameter in execution order, packed into
  // chunks, and the chunks each group uses); each chunk's owner (ZeRO); the host chunks; each
  // parameter moved into its chunk with its optimizer state and gradient buffers; the gradient
  // hooks; which group finishes each chunk's gradients.
  struct ModelLayout {
    std::vector<TensorSpec> specs;
    std::vector<torch::Tensor> tensors;             // parallel to specs
    std::map<std::string, int64_t> index_of_group;  // group name -> GroupRef index
    ChunkLayout layout;
  };
  ModelLayout lay_out(Model& m, const std::vector<ParameterGroup>& groups, const c10::Device& device) const;
  std::vector<int64_t> assign_chunk_owners(const ModelLayout& layout, bool trainable);
  void allocate_chunks(Model& m, const ModelLayout& layout, const std::vector<int64_t>& chunk_owner);
  void place_parameter(Model& m, size_t index, const ModelLayout& layout, bool trainable, bool state_held,
                       const c10::Device& device);
  void allocate_optimizer_state(Model& m, Param& p, const torch::Tensor& tensor);
  void allocate_gradient_buffers(Model& m, Param& p, const torch::Tensor& tensor);
  void attach_gradient_hooks(Model& m, const std::string* model_key);
  void link_chunks_to_groups(Model& m, const std::vector<ParameterGroup>& groups,
                             const std::map<std::string, int64_t>& index_of_group);
  struct Chunk {
    uint64_t bytes = 0;
    torch::Tensor host;    // bytes; undefined for another process's chunk under zero_stage 3
    torch::Tensor device;  // bytes; defined while resident
    Transfer arrival;
    MemoryReservation device_bytes;
    bool keep = false;
    std::vector<size_t> params;  // indices into Model::params
    int64_t last_group = 0;      // the lowest GroupRef index using the chunk: its last in backward
    bool trainable = false;      // holds a trainable parameter
    uint64_t file_offset = 0;    // params_tier nvme: where `host` lies in the model's mapped file
    bool handed = false;         // overlapped step: given to the worker
    bool updated = false;        // overlapped step: AdamW done
    // The process that holds the optimizer state of the chunk's trainable parameters and updates
    // them (zero_stage >= 1; else this one). Another's chunk has gradient buffers here, but no
    // master weights or moments; under zero_stage 3 not even its weights on the host: a page-in
    // receives them from the owner (a broadcast), and every chunk, frozen ones too, has an owner.
    int64_t owner = 0;
  };
  struct Model {
    std::string name;
    bool trainable = false;
    int64_t steps = 0;
    int64_t num_groups = 0;                          // 1 + layers + 1
    std::vector<std::vector<int64_t>> group_chunks;  // by GroupRef index
    std::vector<Param> params;
    std::vector<Chunk> chunks;
    enum class Residency { policy, all, none } residency = Residency::policy;
    std::vector<MemoryReservation> host_bytes;
    int64_t forwards = 0;  // overlapped step: forwards with grad in the micro-batch
    std::unique_ptr<MappedChunkFile> chunk_file;  // params_tier nvme: the host chunks' file
  };
  // params_tier nvme: the chunk's host pages (or every chunk's of the model) leave the process.
  void release_host(const Model& m, const Chunk& ch) const;
  void release_host(const Model& m) const;
  // The last backward in progress (begin_last_backward .. step or zero_grad).
  struct Overlap {
    bool armed = false;
    bool update = false;  // offload.overlap_step: AdamW on the worker too
    double learning_rate = 0.0;
    std::atomic<bool> stopped{false};  // a chunk had non-finite gradients
  };

  Model& model(const std::string& name);
  const Model& model(const std::string& name) const;
  std::vector<Model*> selected(const std::vector<std::string>& models);
  bool chunk_stays(const Model& m, int64_t chunk) const;
  int64_t rank() const { return options_.shard_group != nullptr ? options_.shard_group->rank() : 0; }
  // zero_stage >= 1 over several processes: optimizer state and updates are sharded by chunk.
  bool sharded_state() const {
    return options_.shard_group != nullptr && options_.shard_group->size() > 1 && options_.zero_stage >= 1;
  }
  bool owns(const Chunk& ch) const { return !sharded_state() || ch.owner == rank(); }
  // zero_stage 3: the weights are sharded too. Page-ins and with_weights are then collective:
  // every process makes the same calls in the same order.
  bool sharded_weights() const { return sharded_state() && options_.zero_stage >= 3; }
  void page_in(Model& m, int64_t chunk);
  void page_out(Model& m, int64_t chunk);
  void point_parameters_at_device(Model& m, int64_t chunk);
  // A resident chunk's device bytes of one of its parameters, as that parameter's tensor.
  static torch::Tensor device_view(const Chunk& ch, const Param& p);
  void drain_gradient(Param& p);
  void accumulate(Param& p, const torch::Tensor& gradient);
  // AdamW on the chunk's trainable parameters that have gradients; false if there were none.
  bool update_chunk(Model& m, const Chunk& ch, kernels::AdamWParams params, double grad_multiplier);
  // The same on the NVMe tier, window by window.
  void update_on_nvme(const std::vector<Param*>& params, kernels::AdamWParams adamw, double grad_multiplier);
  // Checkpoints of the NVMe tier's state (chunked_engine_state.cpp).
  void save_nvme_state(const std::filesystem::path& dir, const std::map<std::string, int64_t>& steps,
                       const StateShard& shard) const;
  void load_nvme_state(const std::filesystem::path& dir, std::map<std::string, int64_t>& steps);
  // The parameters whose state the NVMe tier holds, in store order, with their models' names.
  std::vector<std::pair<const std::string*, const Param*>> nvme_params() const;
  void hand_over(Model& m, int64_t chunk);
  void update_chunk_now(Model& m, int64_t chunk);  // on the worker
  // Every trainable parameter's state as the optimizer state file holds it (fp32 moments). With
  // int8 moments: fresh fp32 buffers, holding the dequantised moments when `dequantized`.
  std::vector<ParameterStateRef> state_refs(bool dequantized) const;
  uint64_t moment_bytes(int64_t n) const { return host_moment_bytes(options_.optimizer_state, n); }

  EngineOptions options_;
  MemoryAccountant accountant_;
  std::optional<TransferStreams> transfers_;  // created with the first model (its device)
  std::unique_ptr<ActivationOffloader> offloader_;  // with options.activation_offload
  std::map<std::string, Model> models_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<NvmeStateStore> nvme_;  // offload.optimizer_state_tier nvme
  // GPU only: the gradient staging ring (see above), grown by add_model to its largest tensor.
  static constexpr size_t kStagingSlots = 4;
  struct StagingRing {
    std::vector<torch::Tensor> slots;  // bytes
    std::vector<Param*> last;          // the parameter whose copy a slot took last
    size_t next = 0;
    uint64_t slot_bytes = 0;
    std::optional<MemoryReservation> held;
  } staging_;
  void grow_staging_ring(uint64_t bytes);
  std::vector<MemoryReservation> nvme_bytes_;  // the store's file (nvme tier) and staging ring (host)
  Overlap overlap_;
  int64_t chunks_during_backward_ = 0;
  std::vector<uint64_t> owned_bytes_;  // per process: the trainable bytes it owns (sharded_state)
  std::unique_ptr<BackgroundWorker> worker_;  // last: joined first
};

}  // namespace ferry::offload
