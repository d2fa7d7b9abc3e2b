// PlainEngine, offload policy `none`: parameters, gradients and optimizer state stay where the
// model lives (the baseline every other policy is measured against and tested equal to).
//
// fp32 models update their parameters in place. bf16/fp16 models keep an fp32 master copy of every
// trainable parameter (mixed precision: the update is computed and accumulated in fp32, then
// rounded into the model's weights), so small updates are not lost to bf16's 8-bit mantissa.
// The accountant counts all of it on the device tier (on a machine without a GPU the model's
// memory is the emulated device). CPU tensors are updated by CpuAdamW (kernels/cpu/adamw.h, one
// SIMD pass per tensor that also writes the rounded weights); CUDA tensors by at::_fused_adamw_.
// Both are torch.optim.AdamW's arithmetic.
#pragma once

#include <map>
#include <memory>

#include "offload/engine.h"
#include "offload/host_adam_state.h"
#include "offload/optimizer_state_file.h"

namespace ferry::kernels {
class ThreadPool;
}

namespace ferry::offload {

class PlainEngine : public ParameterEngine {
 public:
  explicit PlainEngine(const EngineOptions& options);
  ~PlainEngine() override;

  void add_model(const std::string& name, std::vector<ParameterGroup> groups, bool trainable) override;
  void make_resident(const std::vector<std::string>& models) override;
  void before_group(const GroupRef&, GroupPass) override {}
  void after_group(const GroupRef&, GroupPass) override {}
  void finish_gradients() override;
  void reduce_gradients() override;
  double gradient_norm(const std::vector<std::string>& models = {}) override;
  bool gradients_finite(const std::vector<std::string>& models = {}) override;
  void step(double learning_rate, double grad_multiplier, const std::vector<std::string>& models = {}) override;
  void zero_grad(const std::vector<std::string>& models = {}) override;
  int64_t step_count(const std::string& model) const override;
  void save_state(const std::filesystem::path& dir) const override;
  void load_state(const std::filesystem::path& dir) override;
  bool needs_recompute(const GroupRef& group) const override { return options_.recomputes_layer_group(group.index); }
  void with_weights(const std::string& model, WeightAccess access, const std::function<void()>& fn) override;
  void for_each_trainable(const std::string& model,
                          const std::function<void(const std::string&, const torch::Tensor&)>& fn) override;
  EngineMemoryReport memory_report() const override;
  const MemoryAccountant& accountant() const override { return accountant_; }
  void reset_memory_peaks() override { accountant_.reset_peaks(); }
  std::unique_ptr<ActivationMeter> meter_activations() override;
  ActivationOffloader* activation_offloader() override { return offloader_.get(); }

 private:
  struct TrainedParameter {
    std::string name;
    torch::Tensor parameter;   // the model's tensor (any dtype, any device)
    // fp32 moments beside the parameter, and an fp32 master copy when the parameter is not fp32
    // (else undefined). On the CPU its update is CpuAdamW's.
    HostAdamState state;
    torch::Tensor cuda_step;   // fp32 scalar on the GPU for _fused_adamw_ (undefined on CPU)
    bool decay = true;         // false for norms and biases
    // The process that holds the optimizer state and updates the tensor (zero_stage >= 1; else
    // this one). Another's tensor has no master and no moments here.
    int64_t owner = 0;
  };
  struct Model {
    std::vector<ParameterGroup> groups;
    bool trainable = false;
    int64_t steps = 0;
    std::vector<TrainedParameter> parameters;
  };

  std::vector<Model*> selected(const std::vector<std::string>& models);
  int64_t rank() const { return options_.shard_group != nullptr ? options_.shard_group->rank() : 0; }
  // zero_stage >= 1 over several processes: optimizer state and updates are sharded.
  bool sharded_state() const {
    return options_.shard_group != nullptr && options_.shard_group->size() > 1 && options_.zero_stage >= 1;
  }
  bool owns(const TrainedParameter& t) const { return !sharded_state() || t.owner == rank(); }
  std::vector<ParameterStateRef> state_refs() const;
  const Model& model(const std::string& name) const;

  EngineOptions options_;
  std::map<std::string, Model> models_;
  std::unique_ptr<kernels::ThreadPool> pool_;  // set when options.cpu_threads > 0
  // Everything is on the device tier under `none`; gradients are counted from finish_gradients
  // to zero_grad (autograd allocates them, the engine only sees them then).
  MemoryAccountant accountant_;
  uint64_t counted_gradient_bytes_ = 0;
  std::unique_ptr<ActivationOffloader> offloader_;  // with options.activation_offload
  std::vector<uint64_t> owned_bytes_;  // per process: the trainable bytes it owns (sharded_state)
};

}  // namespace ferry::offload
