// Offload policies optimizer / params / auto: chunked parameters, gradient streaming, CPU AdamW.
#include "offload/chunked_engine.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/adamw_kahan.h"
#include "kernels/cpu/thread_pool.h"
#include "offload/engine_models.h"
#include "src/core/byte_size.h"
#include "src/core/error.h"

namespace ferry {
namespace {

using offload::MemoryCategory;
using offload::MemoryTier;

// Hands each fresh gradient of one parameter to the engine, right after autograd stored it.
class GradientStreamHook : public torch::autograd::PostAccumulateGradHook {
 public:
  GradientStreamHook(ChunkedEngine* engine, const std::string* model, ChunkedEngine::Param* param)
      : engine_(engine), model_(model), param_(param) {}
  void operator()(const torch::autograd::Variable& /*tensor*/) override { engine_->receive_gradient(*model_, *param_); }

 private:
  ChunkedEngine* engine_;
  const std::string* model_;  // the engine's map key: stable
  ChunkedEngine::Param* param_;
};

kernels::WeightOutType weight_out_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return kernels::WeightOutType::bf16;
    case at::kHalf: return kernels::WeightOutType::f16;
    default: throw InternalError(std::string("ChunkedEngine: no CPU AdamW output for weights of dtype ") +
                                 c10::toString(dtype));
  }
}

// GroupRef index of a group name: "embed" 0, "layers.<i>" 1 + i, "head" num_layers + 1.
int64_t group_index(const std::string& name, int64_t num_layers) {
  if (name == "embed") return 0;
  if (name == "head") return num_layers + 1;
  FERRY_CHECK(name.rfind("layers.", 0) == 0, "unknown parameter group '", name, "'");
  return 1 + std::stoll(name.substr(7));
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

ChunkedEngine::ChunkedEngine(const EngineOptions& options)
    : options_(options), accountant_({options.device_budget, 0, 0}) {
  FERRY_CHECK(options.policy == OffloadPolicy::optimizer || options.policy == OffloadPolicy::params,
              "ChunkedEngine runs the optimizer and params policies (auto is resolved before)");
  if (options.cpu_threads > 0) pool_ = std::make_unique<kernels::ThreadPool>(static_cast<int>(options.cpu_threads));
  if (options.activation_offload) offloader_ = std::make_unique<offload::ActivationOffloader>(accountant_);
}

ChunkedEngine::~ChunkedEngine() {
  if (worker_) {  // an overlapped step cut short: its jobs still use the parameters below
    try {
      worker_->wait();
    } catch (...) {  // the step's failure has been reported (or is being) by whoever cut it short
    }
  }
  // The models may outlive the engine: drop the hooks and leave every parameter holding its
  // weights (the device copy when resident, else the host copy).
  for (auto& [name, m] : models_) {
    for (Param& p : m.params) {
      if (p.trainable) torch::autograd::impl::set_post_acc_grad_hooks(p.parameter, nullptr);
      // (zero_stage 3: another process's chunk has no host copy here; the parameter stays empty.)
      if (!m.chunks[static_cast<size_t>(p.chunk)].device.defined() && !p.host_view.is_meta()) {
        p.parameter.set_data(p.host_view);
      }
    }
  }
}

ChunkedEngine::Model& ChunkedEngine::model(const std::string& name) { return offload::find_model(models_, name); }

const ChunkedEngine::Model& ChunkedEngine::model(const std::string& name) const {
  return offload::find_model(models_, name);
}

std::vector<ChunkedEngine::Model*> ChunkedEngine::selected(const std::vector<std::string>& models) {
  return offload::trainable_models(models_, models);
}

void ChunkedEngine::add_model(const std::string& name, std::vector<ParameterGroup> groups, bool trainable) {
  FERRY_CHECK(!models_.count(name), "model '", name, "' added to the engine twice");
  FERRY_CHECK(!groups.empty() && !groups.front().parameters.empty(), "model '", name, "' has no parameters");
  const c10::Device device = options_.device.value_or(groups.front().parameters.front().second.device());
  if (!transfers_) transfers_.emplace(device);
  FERRY_CHECK(transfers_->device() == device, "model '", name, "' is on ", device.str(), " but the engine's models are on ",
              transfers_->device().str());

  Model& m = models_[name];
  m.name = name;
  m.trainable = trainable;
  int64_t num_layers = 0;
  for (const auto& group : groups) num_layers += group.name.rfind("layers.", 0) == 0 ? 1 : 0;
  m.num_groups = num_layers + 2;
  m.group_chunks.assign(static_cast<size_t>(m.num_groups), {});

  // The layout: every parameter in execution order, tagged with its group's index.
  std::vector<offload::TensorSpec> specs;
  std::vector<torch::Tensor> tensors;
  std::map<std::string, int64_t> index_of_group;
  for (const auto& group : groups) {
    const int64_t index = group_index(group.name, num_layers);
    FERRY_CHECK(index >= 0 && index < m.num_groups, "group '", group.name, "' is out of order");
    index_of_group[group.name] = index;
    for (const auto& [pname, p] : group.parameters) {
      FERRY_CHECK(p.is_contiguous(), "parameter ", pname, " is not contiguous");
      FERRY_CHECK(p.device() == device || p.is_cpu(), "parameter ", pname, " is on ", p.device().str(), ", not ",
                  device.str(), " or the CPU");
      specs.push_back({pname, p.numel(), static_cast<int64_t>(p.element_size()), index});
      tensors.push_back(p);
    }
  }
  const offload::ChunkLayout layout = offload::ChunkLayout::build(specs, {options_.chunk_size, 256});
  for (const auto& group : groups) {
    auto& chunks = m.group_chunks[static_cast<size_t>(index_of_group.at(group.name))];
    chunks = layout.chunks_of_group(index_of_group.at(group.name));
    for (const std::string& other : group.also_uses) {
      auto it = index_of_group.find(other);
      FERRY_CHECK(it != index_of_group.end(), "group '", group.name, "' uses unknown group '", other, "'");
      for (int64_t c : layout.chunks_of_group(it->second)) {
        if (std::find(chunks.begin(), chunks.end(), c) == chunks.end()) chunks.push_back(c);
      }
    }
  }

  // ZeRO: each chunk with trainable parameters gets an owner, balancing their bytes; under stage
  // 3 every chunk does (its weights live on the owner only), balancing the chunks' bytes.
  std::vector<int64_t> chunk_owner(layout.chunks().size(), rank());
  if (sharded_state() && (trainable || sharded_weights())) {
    std::vector<uint64_t> unit_size(layout.chunks().size(), 0);
    if (sharded_weights()) {
      for (size_t c = 0; c < unit_size.size(); ++c) unit_size[c] = layout.chunks()[c].bytes;
    } else {
      for (size_t i = 0; i < specs.size(); ++i) {
        if (tensors[i].requires_grad()) {
          unit_size[static_cast<size_t>(layout.placements()[i].chunk)] += static_cast<uint64_t>(tensors[i].numel());
        }
      }
    }
    std::vector<size_t> units;
    std::vector<uint64_t> unit_bytes;
    for (size_t c = 0; c < unit_size.size(); ++c) {
      if (unit_size[c] == 0) continue;
      units.push_back(c);
      unit_bytes.push_back(unit_size[c]);
    }
    owned_bytes_.resize(static_cast<size_t>(options_.shard_group->size()), 0);
    const std::vector<int64_t> owners = offload::assign_owners(unit_bytes, owned_bytes_);
    for (size_t u = 0; u < units.size(); ++u) chunk_owner[units[u]] = owners[u];
  }
  std::vector<bool> state_held(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    state_held[i] = chunk_owner[static_cast<size_t>(layout.placements()[i].chunk)] == rank();
  }
  uint64_t held_chunk_bytes = layout.total_bytes();
  if (sharded_weights()) {
    held_chunk_bytes = 0;
    for (size_t c = 0; c < layout.chunks().size(); ++c) {
      if (chunk_owner[c] == rank()) held_chunk_bytes += layout.chunks()[c].bytes;
    }
  }
  check_host_budget(name, host_bytes_needed(held_chunk_bytes, tensors, trainable, state_held));

  torch::NoGradGuard no_grad;
  m.chunks.resize(layout.chunks().size());
  for (size_t c = 0; c < layout.chunks().size(); ++c) {
    const offload::Chunk& spec = layout.chunks()[c];
    Chunk& chunk = m.chunks[c];
    chunk.owner = chunk_owner[c];
    chunk.bytes = spec.bytes;
    if (!sharded_weights() || chunk.owner == rank()) {
      chunk.host = transfers_->host_buffer(static_cast<int64_t>(spec.bytes));
      m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::weights, spec.bytes);
    }
    if (options_.policy == OffloadPolicy::optimizer) {
      chunk.keep = true;
    } else {
      chunk.keep = true;
      for (int64_t g = spec.first_group; g <= spec.last_group; ++g) {
        for (const auto& [gname, gi] : index_of_group) {
          if (gi == g && !contains(options_.kept_groups, gname)) chunk.keep = false;
        }
      }
    }
  }
  const auto fp32_host = [&](const torch::Tensor& like) { return transfers_->host_zeros(like.sizes(), at::kFloat); };
  m.params.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    Param& p = m.params[i];
    const offload::TensorPlacement& place = layout.placements()[i];
    const torch::Tensor& tensor = tensors[i];
    p.name = specs[i].name;
    p.parameter = tensor;
    p.chunk = place.chunk;
    p.only_group = specs[i].group;
    p.offset = place.offset;
    const torch::Tensor& host = m.chunks[static_cast<size_t>(place.chunk)].host;
    if (host.defined()) {
      p.host_view = host.narrow(0, static_cast<int64_t>(place.offset), static_cast<int64_t>(place.bytes))
                        .view(tensor.scalar_type())
                        .view(tensor.sizes());
      p.host_view.copy_(tensor.detach());
    } else {  // zero_stage 3, another process's chunk: its shape and dtype only (no storage)
      p.host_view = torch::empty(tensor.sizes(), tensor.options().device(at::kMeta).requires_grad(false));
    }
    p.placeholder = torch::empty({0}, tensor.options().device(device).requires_grad(false));
    m.chunks[static_cast<size_t>(place.chunk)].params.push_back(i);
    p.trainable = trainable && tensor.requires_grad();
    if (p.trainable) p.decay = takes_weight_decay(p.name, tensor);
    // The optimizer state, where this process holds it (ZeRO: where it owns the chunk).
    if (p.trainable && state_held[i]) {
      if (tensor.scalar_type() == at::kFloat) {
        p.master = p.host_view;
      } else if (tensor.scalar_type() == at::kBFloat16 && options_.master_weights == MasterWeights::bf16_kahan) {
        p.compensation = transfers_->host_zeros(tensor.sizes(), at::kBFloat16);  // master = the weights exactly
        m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::master, p.compensation.nbytes());
      } else {
        p.master = p.host_view.to(at::kFloat);
        if (!transfers_->emulated()) p.master = fp32_host(tensor).copy_(p.master);
        m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::master, p.master.nbytes());
      }
      if (int8_moments()) {
        const int64_t blocks = kernels::int8_moment_blocks(tensor.numel());
        p.exp_avg_codes = transfers_->host_zeros({tensor.numel()}, at::kChar);
        p.exp_avg_sq_codes = transfers_->host_zeros({tensor.numel()}, at::kByte);
        p.exp_avg_scale = transfers_->host_zeros({blocks}, at::kFloat);
        p.exp_avg_sq_scale = transfers_->host_zeros({blocks}, at::kFloat);  // all zero: m = v = 0
      } else {
        p.exp_avg = fp32_host(tensor);
        p.exp_avg_sq = fp32_host(tensor);
      }
      m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::moments, moment_bytes(tensor.numel()));
    }
    // Gradient buffers on every process.
    if (p.trainable) {
      p.grad = fp32_host(tensor);
      m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::grads, p.grad.nbytes());
      if (!transfers_->emulated()) {
        p.staging = transfers_->host_zeros(tensor.sizes(), tensor.scalar_type());
        m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::grads, p.staging.nbytes());
      }
    }
    // The model's own storage is freed here; the chunk buffers hold the weights from now on.
    p.parameter.set_data(p.placeholder);
  }
  const std::string* key = &models_.find(name)->first;
  for (Param& p : m.params) {
    if (p.trainable) {
      torch::autograd::impl::set_post_acc_grad_hooks(p.parameter, std::make_unique<GradientStreamHook>(this, key, &p));
    }
  }
  // Backward reaches a chunk's last user group last: then its gradients are complete.
  for (Chunk& chunk : m.chunks) chunk.last_group = m.num_groups;
  for (int64_t g = m.num_groups - 1; g >= 0; --g) {
    for (int64_t c : m.group_chunks[static_cast<size_t>(g)]) m.chunks[static_cast<size_t>(c)].last_group = g;
  }
  for (const Param& p : m.params) m.chunks[static_cast<size_t>(p.chunk)].trainable |= p.trainable;
  for (const auto& group : groups) {
    for (const std::string& other : group.also_uses) {
      for (Param& p : m.params) {
        if (p.only_group == index_of_group.at(other)) p.only_group = -1;
      }
    }
  }
  for (size_t c = 0; c < m.chunks.size(); ++c) {
    if (chunk_stays(m, static_cast<int64_t>(c))) page_in(m, static_cast<int64_t>(c));
  }
  for (size_t c = 0; c < m.chunks.size(); ++c) transfers_->wait_compute(m.chunks[c].arrival);
}

bool ChunkedEngine::chunk_stays(const Model& m, int64_t chunk) const {
  switch (m.residency) {
    case Model::Residency::all: return true;
    case Model::Residency::none: return false;
    case Model::Residency::policy: return m.chunks[static_cast<size_t>(chunk)].keep;
  }
  return false;
}

torch::Tensor ChunkedEngine::device_view(const Chunk& ch, const Param& p) {
  return ch.device.narrow(0, static_cast<int64_t>(p.offset), static_cast<int64_t>(p.host_view.nbytes()))
      .view(p.host_view.scalar_type())
      .view(p.host_view.sizes());
}

void ChunkedEngine::point_parameters_at_device(Model& m, int64_t chunk) {
  Chunk& ch = m.chunks[static_cast<size_t>(chunk)];
  for (size_t i : ch.params) m.params[i].parameter.set_data(device_view(ch, m.params[i]));
}

void ChunkedEngine::page_in(Model& m, int64_t chunk) {
  Chunk& ch = m.chunks[static_cast<size_t>(chunk)];
  if (ch.device.defined()) return;
  const uint64_t bytes = ch.bytes;
  if (accountant_.would_exceed(MemoryTier::device, bytes)) {
    std::ostringstream message;
    message << "offload.gpu_memory: model '" << m.name << "' needs its parameter chunk " << chunk << " ("
            << format_bytes_approx(bytes) << ") on the device, but " << format_bytes_approx(accountant_.current(MemoryTier::device))
            << " of the " << format_bytes_approx(accountant_.budgets().device)
            << " budget are in use by the engine. Raise offload.gpu_memory, page more of the model "
               "(offload.policy=params, a smaller offload.chunk_size, offload.prefetch=0), or run `ferry plan` "
               "to see what fits.\n"
            << accountant_.report();
    throw ConfigError(message.str());
  }
  ch.device_bytes = offload::MemoryReservation(accountant_, MemoryTier::device, MemoryCategory::weights, bytes);
  ch.device = transfers_->device_buffer(static_cast<int64_t>(bytes));
  offload::ActivationMeter::hand_over(ch.device);  // counted as weights above
  if (sharded_weights()) {
    // The owner copies its host bytes to its device buffer and sends them from there into the
    // others' (device tensors on every process: NCCL's when it runs, else Gloo's through the host).
    if (owns(ch)) {
      ch.arrival = transfers_->to_device(ch.device, ch.host);
      transfers_->wait_compute(ch.arrival);
    }
    options_.shard_group->broadcast({ch.device}, ch.owner);
  } else {
    ch.arrival = transfers_->to_device(ch.device, ch.host);
  }
  point_parameters_at_device(m, chunk);
}

void ChunkedEngine::page_out(Model& m, int64_t chunk) {
  Chunk& ch = m.chunks[static_cast<size_t>(chunk)];
  if (!ch.device.defined()) return;
  for (size_t i : ch.params) m.params[i].parameter.set_data(m.params[i].placeholder);
  ch.device = torch::Tensor();  // the host copy is current: nothing to copy back
  ch.arrival = {};
  ch.device_bytes.reset();
}

void ChunkedEngine::make_resident(const std::vector<std::string>& models) {
  for (const auto& name : models) (void)model(name);
  // Out first, so the budget is free for what comes in.
  for (auto& [name, m] : models_) {
    m.residency = models.empty() ? Model::Residency::policy
                  : contains(models, name) ? Model::Residency::all
                                           : Model::Residency::none;
    for (size_t c = 0; c < m.chunks.size(); ++c) {
      if (!chunk_stays(m, static_cast<int64_t>(c))) page_out(m, static_cast<int64_t>(c));
    }
  }
  for (auto& [name, m] : models_) {
    for (size_t c = 0; c < m.chunks.size(); ++c) {
      if (chunk_stays(m, static_cast<int64_t>(c))) page_in(m, static_cast<int64_t>(c));
    }
    for (size_t c = 0; c < m.chunks.size(); ++c) transfers_->wait_compute(m.chunks[c].arrival);
  }
}

bool ChunkedEngine::needs_recompute(const GroupRef& group) const {
  const Model& m = model(*group.model);
  if (group.index < 0 || group.index >= m.num_groups) return false;
  if (group.index > 0 && group.index < m.num_groups - 1 && options_.recomputes_layer_group(group.index)) return true;
  for (int64_t c : m.group_chunks[static_cast<size_t>(group.index)]) {
    if (!chunk_stays(m, c)) return true;
  }
  return false;
}

void ChunkedEngine::before_group(const GroupRef& group, GroupPass pass) {
  Model& m = model(*group.model);
  FERRY_CHECK(group.index >= 0 && group.index < m.num_groups, "group ", group.index, " of model '", m.name,
              "' is out of range");
  if (overlap_.armed && group.index == 0 && pass == GroupPass::forward && torch::GradMode::is_enabled()) ++m.forwards;
  const auto& chunks = m.group_chunks[static_cast<size_t>(group.index)];
  for (int64_t c : chunks) page_in(m, c);
  for (int64_t c : chunks) transfers_->wait_compute(m.chunks[static_cast<size_t>(c)].arrival);
  // Start the next groups' copies; they overlap with this group's compute on a GPU.
  const int64_t direction = pass == GroupPass::forward ? 1 : -1;
  for (int64_t k = 1; k <= options_.prefetch; ++k) {
    const int64_t next = group.index + direction * k;
    if (next < 0 || next >= m.num_groups) break;
    for (int64_t c : m.group_chunks[static_cast<size_t>(next)]) page_in(m, c);
  }
}

void ChunkedEngine::after_group(const GroupRef& group, GroupPass pass) {
  Model& m = model(*group.model);
  if (m.residency == Model::Residency::all) return;
  const int64_t direction = pass == GroupPass::forward ? 1 : -1;
  // Backward starts with the head right after the forward ends: keep it for that.
  if (pass == GroupPass::forward && group.index == m.num_groups - 1 && torch::GradMode::is_enabled()) return;
  std::set<int64_t> upcoming;
  for (int64_t k = 1; k <= std::max<int64_t>(1, options_.prefetch); ++k) {
    const int64_t next = group.index + direction * k;
    if (next < 0 || next >= m.num_groups) break;
    for (int64_t c : m.group_chunks[static_cast<size_t>(next)]) upcoming.insert(c);
  }
  for (int64_t c : m.group_chunks[static_cast<size_t>(group.index)]) {
    if (!chunk_stays(m, c) && !upcoming.count(c)) page_out(m, c);
  }
}

void ChunkedEngine::accumulate(Param& p, const torch::Tensor& gradient) {
  if (p.has_grad) {
    p.grad.add_(gradient);
  } else {
    p.grad.copy_(gradient);
    p.has_grad = true;
  }
}

void ChunkedEngine::drain_gradient(Param& p) {
  if (!p.grad_copy_pending) return;
  transfers_->wait_host(p.grad_copy);
  p.grad_copy_pending = false;
  accumulate(p, p.staging);
}

void ChunkedEngine::receive_gradient(const std::string& model_name, Param& p) {
  torch::Tensor gradient = p.parameter.grad();
  if (!gradient.defined()) return;
  p.parameter.mutable_grad() = torch::Tensor();  // the device gradient goes as soon as it is copied
  torch::NoGradGuard no_grad;
  const uint64_t bytes = gradient.nbytes();
  offload::ActivationMeter::hand_over(gradient);  // counted as a gradient until it is copied
  accountant_.allocate(MemoryTier::device, MemoryCategory::grads, bytes);
  if (transfers_->emulated()) {
    accumulate(p, gradient);
  } else {
    drain_gradient(p);  // the staging buffer is free again
    p.grad_copy = transfers_->to_host(p.staging, gradient);
    p.grad_copy_pending = true;
  }
  accountant_.release(MemoryTier::device, MemoryCategory::grads, bytes);
  if (!overlap_.armed) return;
  // Backward is past every group after p's: the chunks only those use are complete.
  Model& m = model(model_name);
  if (m.forwards != 1 || p.only_group < 0) return;
  for (int64_t c = static_cast<int64_t>(m.chunks.size()) - 1; c >= 0; --c) {
    const Chunk& ch = m.chunks[static_cast<size_t>(c)];
    if (ch.last_group > p.only_group && ch.trainable && !ch.handed) {
      hand_over(m, c);
      ++chunks_during_backward_;
    }
  }
}

void ChunkedEngine::begin_last_backward(std::optional<double> learning_rate) {
  FERRY_CHECK(!overlap_.armed, "begin_last_backward called twice without step() or zero_grad()");
  if (!worker_) worker_ = std::make_unique<offload::BackgroundWorker>();
  overlap_.armed = true;
  overlap_.update = learning_rate.has_value();
  overlap_.learning_rate = learning_rate.value_or(0.0);
  overlap_.stopped = false;
  for (auto& [name, m] : models_) {
    m.forwards = 0;
    for (Chunk& ch : m.chunks) ch.handed = ch.updated = false;
  }
}

void ChunkedEngine::hand_over(Model& m, int64_t chunk) {
  m.chunks[static_cast<size_t>(chunk)].handed = true;
  worker_->submit([this, &m, chunk] { update_chunk_now(m, chunk); });
}

void ChunkedEngine::update_chunk_now(Model& m, int64_t chunk) {
  torch::NoGradGuard no_grad;
  Chunk& ch = m.chunks[static_cast<size_t>(chunk)];
  bool finite = true;
  for (size_t i : ch.params) {
    Param& p = m.params[i];
    if (!p.trainable) continue;
    drain_gradient(p);
    if (!p.has_grad) continue;
    p.norm = p.grad.norm().to(at::kDouble);
    finite = finite && std::isfinite(p.norm.item<double>());
  }
  if (!overlap_.update) return;
  // Chunks arrive in backward order: once one is not finite, none after it is updated.
  if (!finite) overlap_.stopped = true;
  if (overlap_.stopped) return;
  ch.updated = update_chunk(m, ch, options_.adamw_params(overlap_.learning_rate, m.steps + 1), 1.0);
}

bool ChunkedEngine::update_chunk(Model& m, const Chunk& ch, kernels::AdamWParams params, double grad_multiplier) {
  bool updated = false;
  if (!owns(ch)) return false;  // its owner updates it and sends the new weights
  for (size_t i : ch.params) {
    Param& p = m.params[i];
    if (!p.trainable || !p.has_grad) continue;  // unused in this step: left alone, as torch's optimizers do
    params.weight_decay = p.decay ? options_.weight_decay : 0.0;
    const float scale = static_cast<float>(grad_multiplier);
    const int64_t n = p.host_view.numel();
    if (p.compensation.defined()) {  // the bf16 weights are the master, with their compensation
      auto* weight = static_cast<uint16_t*>(p.host_view.data_ptr());
      auto* compensation = static_cast<uint16_t*>(p.compensation.data_ptr());
      if (int8_moments()) {
        kernels::adamw_update_kahan_int8(params, weight, compensation, int8_state(p), p.grad.data_ptr(),
                                         kernels::GradType::f32, scale, n, pool_.get());
      } else {
        kernels::adamw_update_kahan(params, weight, compensation, p.exp_avg.data_ptr<float>(),
                                    p.exp_avg_sq.data_ptr<float>(), p.grad.data_ptr(), kernels::GradType::f32, scale,
                                    n, pool_.get());
      }
      updated = true;
      continue;
    }
    void* weight_out = separate_master(p) ? p.host_view.data_ptr() : nullptr;
    const kernels::WeightOutType out_type =
        separate_master(p) ? weight_out_of(p.host_view.scalar_type()) : kernels::WeightOutType::none;
    if (int8_moments()) {
      kernels::adamw_update_int8(params, p.master.data_ptr<float>(), int8_state(p), p.grad.data_ptr(),
                                 kernels::GradType::f32, scale, weight_out, out_type, n, pool_.get());
    } else {
      kernels::adamw_update(params, p.master.data_ptr<float>(), p.exp_avg.data_ptr<float>(),
                            p.exp_avg_sq.data_ptr<float>(), p.grad.data_ptr(), kernels::GradType::f32, scale,
                            weight_out, out_type, n, pool_.get());
    }
    updated = true;
  }
  return updated;
}

void ChunkedEngine::finish_gradients() {
  torch::NoGradGuard no_grad;
  if (overlap_.armed) {
    // Backward is over: what is left goes to the worker too, in backward order.
    for (auto& [name, m] : models_) {
      if (!m.trainable) continue;
      for (int64_t c = static_cast<int64_t>(m.chunks.size()) - 1; c >= 0; --c) {
        if (m.chunks[static_cast<size_t>(c)].trainable && !m.chunks[static_cast<size_t>(c)].handed) hand_over(m, c);
      }
    }
    worker_->wait();
  }
  for (auto& [name, m] : models_) {
    for (Param& p : m.params) drain_gradient(p);
  }
}

void ChunkedEngine::reduce_gradients() {
  if (options_.shard_group == nullptr) return;
  torch::NoGradGuard no_grad;
  FERRY_CHECK(!overlap_.armed, "reduce_gradients: the gradients were consumed during backward (overlapped step)");
  std::vector<offload::OwnedTensor> grads;
  for (auto& [name, m] : models_) {
    for (Param& p : m.params) {
      if (!p.trainable) continue;
      if (!p.has_grad) {
        p.grad.zero_();
        p.has_grad = true;
      }
      p.norm = torch::Tensor();  // taken before the sum
      grads.push_back({p.grad, m.chunks[static_cast<size_t>(p.chunk)].owner});
    }
  }
  offload::ShardGroup& group = *options_.shard_group;
  if (options_.zero_stage < 2 || !sharded_state()) {
    std::vector<torch::Tensor> all;
    for (const auto& g : grads) all.push_back(g.tensor);
    group.all_reduce_sum(all);
    return;
  }
  offload::reduce_to_owners(group, grads);
  for (auto& [name, m] : models_) {
    for (Param& p : m.params) {
      if (p.trainable && !owns(m.chunks[static_cast<size_t>(p.chunk)])) p.has_grad = false;  // its owner holds the sum
    }
  }
}

double ChunkedEngine::gradient_norm(const std::vector<std::string>& models) {
  torch::NoGradGuard no_grad;
  double sum_of_squares = 0.0;
  for (Model* m : selected(models)) {
    std::vector<torch::Tensor> norms;
    for (const Param& p : m->params) {
      if (p.has_grad) norms.push_back(p.norm.defined() ? p.norm : p.grad.norm().to(at::kDouble));
    }
    if (!norms.empty()) sum_of_squares += torch::stack(norms).pow(2).sum().item<double>();
  }
  // zero_stage 2: each process holds its own share of the summed gradients.
  if (sharded_state() && options_.zero_stage >= 2) sum_of_squares = offload::sum_over_processes(*options_.shard_group, sum_of_squares);
  return std::sqrt(sum_of_squares);
}

bool ChunkedEngine::gradients_finite(const std::vector<std::string>& models) {
  return std::isfinite(gradient_norm(models));
}

void ChunkedEngine::step(double learning_rate, double grad_multiplier, const std::vector<std::string>& models) {
  torch::NoGradGuard no_grad;
  if (overlap_.armed) {
    FERRY_CHECK(!overlap_.update || (models.empty() && grad_multiplier == 1.0 && learning_rate == overlap_.learning_rate),
                "an overlapped step ends with step(its learning rate, 1) for every model");
    worker_->wait();
  }
  transfers_->synchronize();  // no copy may be reading a host chunk while the optimizer writes it
  const bool overlapped = overlap_.armed && overlap_.update;
  overlap_.armed = false;
  for (Model* m : selected(models)) {
    ++m->steps;
    const kernels::AdamWParams params = options_.adamw_params(learning_rate, m->steps);
    // Chunk by chunk: each updated resident chunk starts its copy back to the device while the
    // CPU updates the next one; the copies are waited for once, at the end. An overlapped step
    // has done the updates already (or stopped at non-finite gradients): only the copies remain.
    for (Chunk& ch : m->chunks) {
      const bool updated = overlapped ? ch.updated : update_chunk(*m, ch, params, grad_multiplier);
      // Paged chunks read the new weights at their next page-in.
      if (updated && ch.device.defined()) ch.arrival = transfers_->to_device(ch.device, ch.host);
    }
    if (sharded_state()) {
      // Every owner sends the new values of the trainable tensors it updated (frozen ones, e.g. a
      // LoRA base sharing the chunk, never change). Stage 1-2: host to host, then the others'
      // resident device copies follow. Stage 3: device to device, resident chunks only (a paged-out
      // one is sent whole at its next page-in).
      if (sharded_weights()) {
        for (Chunk& ch : m->chunks) transfers_->wait_compute(ch.arrival);  // the owners' device copies
      }
      std::vector<offload::OwnedTensor> updated;
      for (Chunk& ch : m->chunks) {
        if (!ch.trainable || (sharded_weights() && !ch.device.defined())) continue;
        for (size_t i : ch.params) {
          const Param& p = m->params[i];
          if (!p.trainable) continue;
          updated.push_back({sharded_weights() ? device_view(ch, p) : p.host_view, ch.owner});
        }
      }
      offload::broadcast_from_owners(*options_.shard_group, updated);
      for (Chunk& ch : m->chunks) {
        if (!sharded_weights() && ch.trainable && !owns(ch) && ch.device.defined()) {
          ch.arrival = transfers_->to_device(ch.device, ch.host);
        }
      }
    }
    for (Chunk& ch : m->chunks) transfers_->wait_compute(ch.arrival);
  }
}

uint64_t ChunkedEngine::host_bytes_needed(uint64_t chunk_bytes, const std::vector<torch::Tensor>& tensors,
                                          bool trainable, const std::vector<bool>& state_held) const {
  uint64_t bytes = chunk_bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = tensors[i];
    if (!trainable || !t.requires_grad()) continue;
    const uint64_t n = static_cast<uint64_t>(t.numel());
    // The fp32 gradient accumulator and the pinned gradient staging buffer on a GPU; where this
    // process holds the optimizer state, moments and fp32 master weights unless the weights are fp32.
    bytes += n * 4 + (transfers_->emulated() ? 0 : t.nbytes());
    if (state_held[i]) bytes += moment_bytes(t.numel()) + (t.scalar_type() == at::kFloat ? 0 : n * 4);
  }
  return bytes;
}

void ChunkedEngine::check_host_budget(const std::string& model, uint64_t needed) const {
  const uint64_t budget = options_.host_budget, held = accountant_.current(MemoryTier::host);
  if (budget == 0 || held + needed <= budget) return;
  std::ostringstream message;
  message << "offload.host_memory: model '" << model << "' needs " << format_bytes_approx(needed)
          << " of host memory (its weight chunks, fp32 master weights, Adam moments and gradient buffers)";
  if (held > 0) message << " on top of the " << format_bytes_approx(held) << " already held";
  message << ", but the host budget is " << format_bytes_approx(budget)
          << ". Raise offload.host_memory (0: what /proc/meminfo says is available, less 10%), train LoRA adapters "
             "(lora.rank) instead of every weight, or run `ferry plan` to see what fits both tiers.";
  throw ConfigError(message.str());
}

std::unique_ptr<offload::ActivationMeter> ChunkedEngine::meter_activations() {
  if (!transfers_->emulated()) return nullptr;
  return std::make_unique<offload::ActivationMeter>(accountant_);
}

void ChunkedEngine::zero_grad(const std::vector<std::string>& models) {
  if (overlap_.armed) {  // a step that never reached step(): let the worker finish, then forget it
    overlap_.armed = false;
    worker_->wait();
  }
  for (Model* m : selected(models)) {
    for (Param& p : m->params) {
      if (p.grad_copy_pending) transfers_->wait_host(p.grad_copy);
      p.grad_copy_pending = false;
      p.has_grad = false;
      p.norm = torch::Tensor();
      if (p.trainable) p.parameter.mutable_grad() = torch::Tensor();
    }
  }
}

int64_t ChunkedEngine::step_count(const std::string& name) const { return model(name).steps; }

bool ChunkedEngine::int8_moments() const { return options_.optimizer_state == OptimizerState::int8; }

uint64_t ChunkedEngine::moment_bytes(int64_t n) const {
  return static_cast<uint64_t>(int8_moments() ? kernels::int8_moment_bytes(n) : 8 * n);
}

kernels::Int8Moments ChunkedEngine::int8_state(const Param& p) {
  return {p.exp_avg_codes.data_ptr<int8_t>(), p.exp_avg_scale.data_ptr<float>(), p.exp_avg_sq_codes.data_ptr<uint8_t>(),
          p.exp_avg_sq_scale.data_ptr<float>()};
}

std::vector<offload::ParameterStateRef> ChunkedEngine::state_refs(bool dequantized) const {
  std::vector<offload::ParameterStateRef> refs;
  for (const auto& [name, m] : models_) {
    for (const Param& p : m.params) {
      if (!p.trainable || !owns(m.chunks[static_cast<size_t>(p.chunk)])) continue;
      offload::ParameterStateRef ref{name, p.name, p.exp_avg, p.exp_avg_sq,
                                     separate_master(p) ? p.master : torch::Tensor()};
      if (p.compensation.defined()) {  // files hold the fp32 master: decoded to save, encoded after a load
        ref.master = torch::zeros(p.host_view.sizes(), at::kFloat);
        if (dequantized) {
          kernels::decode_kahan_master(static_cast<const uint16_t*>(p.host_view.data_ptr()),
                                       static_cast<const uint16_t*>(p.compensation.data_ptr()),
                                       ref.master.data_ptr<float>(), p.host_view.numel());
        }
      }
      if (int8_moments()) {  // files hold fp32 moments whatever the format: fp32 buffers to save from / load into
        ref.exp_avg = torch::zeros(p.host_view.sizes(), at::kFloat);
        ref.exp_avg_sq = torch::zeros(p.host_view.sizes(), at::kFloat);
        if (dequantized) {
          kernels::dequantize_int8_moments(int8_state(p), ref.exp_avg.data_ptr<float>(),
                                           ref.exp_avg_sq.data_ptr<float>(), p.host_view.numel());
        }
      }
      refs.push_back(std::move(ref));
    }
  }
  return refs;
}

void ChunkedEngine::save_state(const std::filesystem::path& dir) const {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = m.steps;
  }
  offload::StateShard shard;
  if (sharded_state()) shard = {options_.shard_group->rank(), options_.shard_group->size()};
  offload::save_optimizer_state(dir, std::string(enum_name(options_.policy)), state_refs(true), steps, shard);
}

void ChunkedEngine::load_state(const std::filesystem::path& dir) {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = 0;
  }
  const std::vector<offload::ParameterStateRef> refs = state_refs(false);
  offload::load_optimizer_state(dir, refs, steps);
  size_t i = 0;
  for (auto& [name, m] : models_) {
    for (Param& p : m.params) {
      if (!p.trainable || !owns(m.chunks[static_cast<size_t>(p.chunk)])) continue;
      const offload::ParameterStateRef& ref = refs[i++];
      if (int8_moments()) {  // quantising the saved (dequantised) moments gives back the same codes
        kernels::quantize_int8_moments(ref.exp_avg.data_ptr<float>(), ref.exp_avg_sq.data_ptr<float>(), int8_state(p),
                                       p.host_view.numel());
      }
      if (p.compensation.defined()) {
        // The weights were loaded before (the checkpoint's bf16 w); c = bf16(master - w) gives the pair
        // whose value is the saved master exactly (kernels/cpu/adamw_kahan.h).
        const torch::Tensor residual = ref.master - p.host_view.to(at::kFloat);
        p.compensation.copy_(residual.to(at::kBFloat16));
      }
    }
  }
  for (const auto& [name, count] : steps) models_.at(name).steps = count;
}

void ChunkedEngine::with_weights(const std::string& name, WeightAccess access, const std::function<void()>& fn) {
  Model& m = model(name);
  if (transfers_) transfers_->synchronize();
  // zero_stage 3: the other processes' chunks are gathered into temporary host buffers.
  std::vector<torch::Tensor> gathered(m.chunks.size());
  if (sharded_weights()) {
    std::vector<offload::OwnedTensor> chunks;
    for (size_t c = 0; c < m.chunks.size(); ++c) {
      Chunk& ch = m.chunks[c];
      if (!owns(ch)) gathered[c] = torch::empty({static_cast<int64_t>(ch.bytes)}, torch::dtype(at::kByte));
      chunks.push_back({owns(ch) ? ch.host : gathered[c], ch.owner});
    }
    offload::broadcast_from_owners(*options_.shard_group, chunks);
  }
  const auto host_tensor = [&](const Param& p) {
    const torch::Tensor& bytes = gathered[static_cast<size_t>(p.chunk)];
    if (!bytes.defined()) return p.host_view;
    return bytes.narrow(0, static_cast<int64_t>(p.offset), static_cast<int64_t>(p.host_view.nbytes()))
        .view(p.host_view.scalar_type())
        .view(p.host_view.sizes());
  };
  for (Param& p : m.params) p.parameter.set_data(host_tensor(p));
  const auto restore = [&] {
    for (size_t c = 0; c < m.chunks.size(); ++c) {
      if (m.chunks[c].device.defined()) {
        point_parameters_at_device(m, static_cast<int64_t>(c));
      } else {
        for (size_t i : m.chunks[c].params) m.params[i].parameter.set_data(m.params[i].placeholder);
      }
    }
  };
  try {
    fn();
  } catch (...) {
    restore();
    throw;
  }
  restore();
  if (access == WeightAccess::read) return;
  torch::NoGradGuard no_grad;
  for (Param& p : m.params) {
    if (p.trainable && separate_master(p)) p.master.copy_(p.host_view);
    if (p.trainable && p.compensation.defined()) p.compensation.zero_();  // the written weights are the master
  }
  for (size_t c = 0; c < m.chunks.size(); ++c) {
    Chunk& ch = m.chunks[c];
    if (!ch.device.defined()) continue;
    ch.arrival = transfers_->to_device(ch.device, gathered[c].defined() ? gathered[c] : ch.host);
    transfers_->wait_compute(ch.arrival);
  }
  if (transfers_) transfers_->synchronize();  // the gathered buffers are read by those copies
}

void ChunkedEngine::for_each_trainable(const std::string& name,
                                       const std::function<void(const std::string&, const torch::Tensor&)>& fn) {
  for (const Param& p : model(name).params) {
    if (p.trainable) fn(p.name, p.host_view);  // what with_weights points the parameter at
  }
}

int64_t ChunkedEngine::chunk_count(const std::string& name) const {
  return static_cast<int64_t>(model(name).chunks.size());
}

int64_t ChunkedEngine::resident_chunk_count(const std::string& name) const {
  int64_t count = 0;
  for (const Chunk& ch : model(name).chunks) count += ch.device.defined() ? 1 : 0;
  return count;
}

EngineMemoryReport ChunkedEngine::memory_report() const {
  EngineMemoryReport report;
  const std::string device = !transfers_ ? "device" : transfers_->emulated() ? "emulated device" : transfers_->device().str();
  const std::string host = transfers_ && !transfers_->emulated() ? "pinned host" : "host";
  for (MemoryTier tier : {MemoryTier::device, MemoryTier::host}) {
    for (MemoryCategory category : offload::kAllMemoryCategories) {
      const uint64_t bytes = accountant_.current(tier, category);
      if (bytes == 0) continue;
      report.lines.push_back({std::string(offload::memory_category_name(category)),
                              tier == MemoryTier::device ? device : host, bytes});
    }
  }
  return report;
}

}  // namespace ferry
