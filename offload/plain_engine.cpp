// Offload policy `none`: AdamW where the parameters are (CpuAdamW on CPU, fused AdamW on CUDA).
#include "offload/plain_engine.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/thread_pool.h"
#include "offload/engine_models.h"
#include "offload/optimizer_state_file.h"
#include "src/model/packed_parameters.h"

namespace ferry::offload {
namespace {

std::string tier_of(const torch::Tensor& t) { return t.device().str(); }

}  // namespace

PlainEngine::PlainEngine(const EngineOptions& options) : options_(options), accountant_({options.device_budget, 0, 0}) {
  if (options.activation_offload) offloader_ = std::make_unique<ActivationOffloader>(accountant_);
  if (options.optimizer_state == OptimizerState::int8) {
    throw ConfigError("offload.optimizer_state int8 is for the CPU optimizer's host state: the none policy keeps "
                      "fp32 moments where the model runs; use offload.policy optimizer or params, or "
                      "offload.optimizer_state fp32");
  }
  if (options.optimizer_state_tier != StateTier::host || options.params_tier != StateTier::host) {
    throw ConfigError("offload.optimizer_state_tier / params_tier nvme are for the offloading engine's host state: "
                      "the none policy keeps everything where the model runs; use offload.policy optimizer or params, "
                      "or set them to host");
  }
  if (options.master_weights != MasterWeights::fp32) {
    throw ConfigError("offload.master_weights " + std::string(enum_name(options.master_weights)) + " is for the CPU optimizer's host state: the none policy "
                      "keeps the optimizer where the model runs; use offload.policy optimizer or params, or "
                      "offload.master_weights fp32");
  }
  if (options.zero_stage >= 3 && options.shard_group != nullptr && options.shard_group->size() > 1) {
    throw ConfigError("distributed.zero_stage 3 needs offload.policy optimizer, params or auto (the chunked engine "
                      "pages the sharded weights in); use zero_stage 2 with offload.policy none");
  }
  if (options.cpu_threads > 0) pool_ = std::make_unique<kernels::ThreadPool>(static_cast<int>(options.cpu_threads));
}

PlainEngine::~PlainEngine() = default;

void PlainEngine::add_model(const std::string& name, std::vector<ParameterGroup> groups, bool trainable) {
  FERRY_CHECK(!models_.count(name), "model '", name, "' added to the engine twice");
  Model& m = models_[name];
  m.trainable = trainable;
  m.groups = std::move(groups);
  if (options_.device) {
    torch::NoGradGuard no_grad;
    for (ParameterGroup& group : m.groups) {
      for (auto& [pname, p] : group.parameters) {
        if (p.device() != *options_.device) p.set_data(p.detach().to(*options_.device));
      }
    }
  }
  {  // the weights stay where they are: one page-aligned buffer (packed_parameters.h)
    std::vector<torch::Tensor> parameters;
    bool quantized = false;  // QLoRA's bases hold their weights in structures of their own: as they are
    for (const ParameterGroup& group : m.groups) {
      for (const auto& [pname, p] : group.parameters) {
        parameters.push_back(p);
        quantized |= !p.is_floating_point();
      }
    }
    if (!quantized) pack_parameters(parameters);
  }
  for (const ParameterGroup& group : m.groups) {
    for (const auto& [pname, p] : group.parameters) {
      accountant_.allocate(MemoryTier::device, MemoryCategory::weights, p.nbytes());
    }
  }
  if (!trainable) return;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> owners;
  if (sharded_state()) {
    std::vector<uint64_t> bytes;
    for (const ParameterGroup& group : m.groups) {
      for (const auto& [pname, p] : group.parameters) {
        if (p.requires_grad()) bytes.push_back(p.nbytes());
      }
    }
    owned_bytes_.resize(static_cast<size_t>(options_.shard_group->size()), 0);
    owners = dist::assign_owners(bytes, owned_bytes_);
  }
  for (const ParameterGroup& group : m.groups) {
    for (const auto& [pname, p] : group.parameters) {
      if (!p.requires_grad()) continue;
      FERRY_CHECK(p.is_contiguous(), "parameter ", pname, " is not contiguous");
      TrainedParameter t;
      t.name = pname;
      t.parameter = p;
      t.decay = takes_weight_decay(pname, p);
      if (!owners.empty()) t.owner = owners[m.parameters.size()];
      if (!owns(t)) {  // another process holds its optimizer state
        m.parameters.push_back(std::move(t));
        continue;
      }
      HostAdamState& state = t.state;
      if (p.scalar_type() != at::kFloat) state.master = p.detach().to(at::kFloat).clone();
      allocate_moments(state, OptimizerState::fp32, p, [&](at::IntArrayRef sizes, at::ScalarType dtype) {
        return torch::zeros(sizes, p.options().dtype(dtype));
      });
      if (p.is_cuda()) t.cuda_step = torch::zeros({}, p.options().dtype(at::kFloat));
      if (state.master.defined()) {
        accountant_.allocate(MemoryTier::device, MemoryCategory::master, state.master.nbytes());
      }
      accountant_.allocate(MemoryTier::device, MemoryCategory::moments,
                           host_moment_bytes(OptimizerState::fp32, p.numel()));
      m.parameters.push_back(std::move(t));
    }
  }
}

void PlainEngine::make_resident(const std::vector<std::string>& models) {
  for (const auto& name : models) (void)model(name);  // everything is always resident under `none`
}

const PlainEngine::Model& PlainEngine::model(const std::string& name) const {
  return find_model(models_, name);
}

std::vector<PlainEngine::Model*> PlainEngine::selected(const std::vector<std::string>& models) {
  return trainable_models(models_, models);
}

void PlainEngine::reduce_gradients() {
  if (options_.shard_group == nullptr) return;
  torch::NoGradGuard no_grad;
  std::vector<dist::OwnedTensor> grads;
  for (Model* m : selected({})) {
    for (auto& t : m->parameters) {
      if (!t.parameter.grad().defined()) t.parameter.mutable_grad() = torch::zeros_like(t.parameter);
      grads.push_back({t.parameter.grad(), t.owner});
    }
  }
  dist::ShardGroup& group = *options_.shard_group;
  if (options_.zero_stage < 2 || group.size() == 1) {
    std::vector<torch::Tensor> all;
    for (const auto& g : grads) all.push_back(g.tensor);
    group.all_reduce_sum(all);
    return;
  }
  dist::reduce_to_owners(group, grads);
  uint64_t dropped = 0;
  for (Model* m : selected({})) {
    for (auto& t : m->parameters) {
      if (owns(t)) continue;
      dropped += t.parameter.grad().nbytes();
      t.parameter.mutable_grad() = torch::Tensor();  // its owner holds the sum
    }
  }
  dropped = std::min(dropped, counted_gradient_bytes_);
  accountant_.release(MemoryTier::device, MemoryCategory::grads, dropped);
  counted_gradient_bytes_ -= dropped;
}

double PlainEngine::gradient_norm(const std::vector<std::string>& models) {
  torch::NoGradGuard no_grad;
  double sum_of_squares = 0.0;
  for (Model* m : selected(models)) {
    std::vector<torch::Tensor> norms;
    for (const auto& t : m->parameters) {
      const torch::Tensor& g = t.parameter.grad();
      if (g.defined()) norms.push_back(g.to(at::kFloat).norm().to(at::kDouble));
    }
    if (norms.empty()) continue;
    // One host sync per model: the per-tensor norms are summed on their device.
    sum_of_squares += torch::stack(norms).pow(2).sum().item<double>();
  }
  // zero_stage 2: each process holds its own share of the summed gradients.
  if (sharded_state() && options_.zero_stage >= 2) sum_of_squares = dist::sum_over_processes(*options_.shard_group, sum_of_squares);
  return std::sqrt(sum_of_squares);
}

bool PlainEngine::gradients_finite(const std::vector<std::string>& models) {
  // An inf or NaN anywhere makes the global norm inf or NaN.
  return std::isfinite(gradient_norm(models));
}

void PlainEngine::step(double learning_rate, double grad_multiplier, const std::vector<std::string>& models) {
  torch::NoGradGuard no_grad;
  for (Model* m : selected(models)) {
    ++m->steps;
    kernels::AdamWParams params = options_.adamw_params(learning_rate, m->steps);
    for (auto& t : m->parameters) {
      torch::Tensor grad = t.parameter.grad();
      if (!grad.defined() || !owns(t)) continue;  // unused in this step: left alone, as torch's optimizers do
      params.weight_decay = t.decay ? options_.weight_decay : 0.0;
      if (t.parameter.is_cpu()) {
        t.state.update(params, t.parameter, grad.contiguous(), static_cast<float>(grad_multiplier), pool_.get());
      } else {
        // _fused_adamw_ divides gradients by grad_scale and reads the already incremented step.
        torch::Tensor grad32 = grad.to(at::kFloat);
        torch::Tensor weights = t.state.master.defined() ? t.state.master : t.parameter;
        t.cuda_step.add_(1);
        const torch::Tensor inverse_multiplier = torch::full({}, 1.0 / grad_multiplier, weights.options());
        at::_fused_adamw_({weights}, {grad32}, {t.state.exp_avg}, {t.state.exp_avg_sq}, {}, {t.cuda_step}, learning_rate,
                          options_.beta1, options_.beta2, params.weight_decay, options_.eps, /*amsgrad=*/false,
                          /*maximize=*/false, inverse_multiplier, std::nullopt);
        if (t.state.master.defined()) t.parameter.copy_(t.state.master);
      }
    }
  }
  if (!sharded_state()) return;
  // Every owner sends the new weights of what it updated.
  std::vector<dist::OwnedTensor> weights;
  for (Model* m : selected(models)) {
    for (auto& t : m->parameters) weights.push_back({t.parameter.detach(), t.owner});
  }
  dist::broadcast_from_owners(*options_.shard_group, weights);
}

void PlainEngine::finish_gradients() {
  uint64_t bytes = 0;
  for (auto& [name, m] : models_) {
    for (const auto& t : m.parameters) {
      ActivationMeter::hand_over(t.parameter.grad());  // counted as gradients from here on
      if (t.parameter.grad().defined()) bytes += t.parameter.grad().nbytes();
    }
  }
  if (bytes > counted_gradient_bytes_) {
    accountant_.allocate(MemoryTier::device, MemoryCategory::grads, bytes - counted_gradient_bytes_);
    counted_gradient_bytes_ = bytes;
  }
}

std::unique_ptr<ActivationMeter> PlainEngine::meter_activations() {
  if (options_.device && !options_.device->is_cpu()) return nullptr;
  return std::make_unique<ActivationMeter>(accountant_);
}

void PlainEngine::zero_grad(const std::vector<std::string>& models) {
  for (Model* m : selected(models)) {
    for (auto& t : m->parameters) t.parameter.mutable_grad() = torch::Tensor();  // set_to_none, as torch
  }
  if (models.empty() && counted_gradient_bytes_ > 0) {
    accountant_.release(MemoryTier::device, MemoryCategory::grads, counted_gradient_bytes_);
    counted_gradient_bytes_ = 0;
  }
}

int64_t PlainEngine::step_count(const std::string& name) const { return model(name).steps; }

std::vector<ParameterStateRef> PlainEngine::state_refs() const {
  std::vector<ParameterStateRef> refs;
  for (const auto& [name, m] : models_) {
    for (const auto& t : m.parameters) {
      if (owns(t)) refs.push_back(t.state.as_saved(name, t.name, t.parameter, /*decoded=*/true));
    }
  }
  return refs;
}

void PlainEngine::save_state(const std::filesystem::path& dir) const {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = m.steps;
  }
  StateShard shard;
  if (sharded_state()) shard = {options_.shard_group->rank(), options_.shard_group->size()};
  save_optimizer_state(dir, "none", state_refs(), steps, shard);
}

void PlainEngine::load_state(const std::filesystem::path& dir) {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = 0;
  }
  load_optimizer_state(dir, state_refs(), steps);
  for (auto& [name, count] : steps) {
    Model& m = models_.at(name);
    m.steps = count;
    for (auto& t : m.parameters) {
      if (t.cuda_step.defined()) t.cuda_step.fill_(static_cast<double>(count));
    }
  }
}

void PlainEngine::with_weights(const std::string& name, WeightAccess access, const std::function<void()>& fn) {
  (void)model(name);  // checks the name
  fn();
  if (access == WeightAccess::read) return;
  torch::NoGradGuard no_grad;
  for (auto& t : models_.at(name).parameters) {
    if (t.state.master.defined()) t.state.master.copy_(t.parameter);
  }
}

void PlainEngine::for_each_trainable(const std::string& name,
                                     const std::function<void(const std::string&, const torch::Tensor&)>& fn) {
  for (const auto& t : model(name).parameters) fn(t.name, t.parameter);
}

EngineMemoryReport PlainEngine::memory_report() const {
  std::map<std::pair<std::string, std::string>, uint64_t> bytes;
  for (const auto& [name, m] : models_) {
    for (const auto& group : m.groups) {
      for (const auto& [pname, p] : group.parameters) {
        bytes[{"weights", tier_of(p)}] += p.nbytes();
        if (p.grad().defined()) bytes[{"gradients", tier_of(p)}] += p.grad().nbytes();
      }
    }
    for (const auto& t : m.parameters) {
      const HostAdamState& state = t.state;
      if (state.master.defined()) bytes[{"master weights", tier_of(state.master)}] += state.master.nbytes();
      if (state.exp_avg.defined()) {
        bytes[{"adam moments", tier_of(state.exp_avg)}] += state.exp_avg.nbytes() + state.exp_avg_sq.nbytes();
      }
    }
  }
  EngineMemoryReport report;
  for (const auto& [key, n] : bytes) report.lines.push_back({key.first, key.second, n});
  return report;
}

}  // namespace ferry::offload
