// Offload policies optimizer / params / auto: chunked parameters, gradient streaming, CPU AdamW.
// This file: construction, and add_model's steps (the layout into chunks, each chunk's owner, the
// host buffers, optimizer state and gradient buffers); chunked_engine_paging.cpp moves chunks
// between host and device, chunked_engine_step.cpp streams gradients and takes the step,
// chunked_engine_state.cpp saves and loads the optimizer state.
#include "offload/chunked_engine.h"
#include "offload/mapped_chunk_file.h"
#include "offload/nvme_state_store.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"
#include "kernels/cpu/thread_pool.h"
#include "offload/engine_models.h"

namespace ferry::offload {
namespace {


// GroupRef index of a group name: "embed" 0, "layers.<i>" 1 + i, "head" num_layers + 1.
int64_t group_index(const std::string& name, int64_t num_layers) {
  if (name == "embed") return 0;
  if (name == "head") return num_layers + 1;
  FERRY_CHECK(name.rfind("layers.", 0) == 0, "unknown parameter group '", name, "'");
  return 1 + std::stoll(name.substr(7));
}

}  // namespace

ChunkedEngine::ChunkedEngine(const EngineOptions& options)
    : options_(options), accountant_({options.device_budget, 0, 0}) {
  FERRY_CHECK(options.policy == OffloadPolicy::optimizer || options.policy == OffloadPolicy::params,
              "ChunkedEngine runs the optimizer and params policies (auto is resolved before)");
  if (options.cpu_threads > 0) pool_ = std::make_unique<kernels::ThreadPool>(static_cast<int>(options.cpu_threads));
  if (options.activation_offload) offloader_ = std::make_unique<ActivationOffloader>(accountant_);
  if (options.optimizer_state_tier == StateTier::nvme) {
    NvmeOptions nvme;
    nvme.dir = options.nvme_dir;
    nvme.budget = options.nvme_budget;
    nvme.window = options.nvme_window;
    nvme_ = std::make_unique<NvmeStateStore>(nvme);
  }
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

ChunkedEngine::Model& ChunkedEngine::model(const std::string& name) { return find_model(models_, name); }

void ChunkedEngine::release_host(const Model& m, const Chunk& ch) const {
  if (m.chunk_file && ch.host.defined()) m.chunk_file->release(ch.file_offset, ch.bytes);
}

void ChunkedEngine::release_host(const Model& m) const {
  for (const Chunk& ch : m.chunks) release_host(m, ch);
}

const ChunkedEngine::Model& ChunkedEngine::model(const std::string& name) const {
  return find_model(models_, name);
}

std::vector<ChunkedEngine::Model*> ChunkedEngine::selected(const std::vector<std::string>& models) {
  return trainable_models(models_, models);
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
  const ModelLayout l = lay_out(m, groups, device);
  const std::vector<int64_t> chunk_owner = assign_chunk_owners(l, trainable);
  std::vector<bool> state_held(l.specs.size());
  for (size_t i = 0; i < l.specs.size(); ++i) {
    state_held[i] = chunk_owner[static_cast<size_t>(l.layout.placements()[i].chunk)] == rank();
  }
  uint64_t held_chunk_bytes = l.layout.total_bytes();
  if (sharded_weights()) {
    held_chunk_bytes = 0;
    for (size_t c = 0; c < l.layout.chunks().size(); ++c) {
      if (chunk_owner[c] == rank()) held_chunk_bytes += l.layout.chunks()[c].bytes;
    }
  }
  if (options_.params_tier == StateTier::nvme) held_chunk_bytes = 0;  // in the mapped file, not host memory
  check_host_budget(name, host_bytes_needed(held_chunk_bytes, l.tensors, trainable, state_held));

  torch::NoGradGuard no_grad;
  allocate_chunks(m, l, chunk_owner);
  m.params.resize(l.specs.size());
  for (size_t i = 0; i < l.specs.size(); ++i) place_parameter(m, i, l, trainable, state_held[i], device);
  if (nvme_) {  // the state of the parameters just placed gets its file; the ring may have grown
    const uint64_t ring_before = nvme_->staging_bytes(), file_before = nvme_->file_bytes();
    nvme_->seal();
    nvme_bytes_.emplace_back(accountant_, MemoryTier::nvme, MemoryCategory::moments, nvme_->file_bytes() - file_before);
    nvme_bytes_.emplace_back(accountant_, MemoryTier::host, MemoryCategory::moments, nvme_->staging_bytes() - ring_before);
  }
  release_host(m);  // the placed weights are in the file now
  attach_gradient_hooks(m, &models_.find(name)->first);
  link_chunks_to_groups(m, groups, l.index_of_group);
  for (size_t c = 0; c < m.chunks.size(); ++c) {
    if (chunk_stays(m, static_cast<int64_t>(c))) page_in(m, static_cast<int64_t>(c));
  }
  for (size_t c = 0; c < m.chunks.size(); ++c) transfers_->wait_compute(m.chunks[c].arrival);
}

ChunkedEngine::ModelLayout ChunkedEngine::lay_out(Model& m, const std::vector<ParameterGroup>& groups,
                                                  const c10::Device& device) const {
  int64_t num_layers = 0;
  for (const auto& group : groups) num_layers += group.name.rfind("layers.", 0) == 0 ? 1 : 0;
  m.num_groups = num_layers + 2;
  m.group_chunks.assign(static_cast<size_t>(m.num_groups), {});

  // Every parameter in execution order, tagged with its group's index.
  std::vector<TensorSpec> specs;
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
  ChunkLayout layout = ChunkLayout::build(specs, {options_.chunk_size, 256});
  // The chunks each group uses: its own, and those of the groups it also uses (a tied embedding).
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
  return {std::move(specs), std::move(tensors), std::move(index_of_group), std::move(layout)};
}

std::vector<int64_t> ChunkedEngine::assign_chunk_owners(const ModelLayout& l, bool trainable) {
  // ZeRO: each chunk with trainable parameters gets an owner, balancing their bytes; under stage
  // 3 every chunk does (its weights live on the owner only), balancing the chunks' bytes.
  std::vector<int64_t> chunk_owner(l.layout.chunks().size(), rank());
  if (!sharded_state() || !(trainable || sharded_weights())) return chunk_owner;
  std::vector<uint64_t> unit_size(l.layout.chunks().size(), 0);
  if (sharded_weights()) {
    for (size_t c = 0; c < unit_size.size(); ++c) unit_size[c] = l.layout.chunks()[c].bytes;
  } else {
    for (size_t i = 0; i < l.specs.size(); ++i) {
      if (l.tensors[i].requires_grad()) {
        unit_size[static_cast<size_t>(l.layout.placements()[i].chunk)] += static_cast<uint64_t>(l.tensors[i].numel());
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
  const std::vector<int64_t> owners = dist::assign_owners(unit_bytes, owned_bytes_);
  for (size_t u = 0; u < units.size(); ++u) chunk_owner[units[u]] = owners[u];
  return chunk_owner;
}

void ChunkedEngine::allocate_chunks(Model& m, const ModelLayout& l, const std::vector<int64_t>& chunk_owner) {
  m.chunks.resize(l.layout.chunks().size());
  const auto held_here = [&](size_t c) { return !sharded_weights() || chunk_owner[c] == rank(); };
  if (options_.params_tier == StateTier::nvme) {  // page-aligned ranges of one mapped file
    uint64_t file_bytes = 0;
    for (size_t c = 0; c < l.layout.chunks().size(); ++c) {
      if (!held_here(c)) continue;
      m.chunks[c].file_offset = file_bytes;
      file_bytes += round_up_to_alignment(l.layout.chunks()[c].bytes);
    }
    m.chunk_file = std::make_unique<MappedChunkFile>(options_.nvme_dir, file_bytes);
    m.host_bytes.emplace_back(accountant_, MemoryTier::nvme, MemoryCategory::weights, file_bytes);
  }
  for (size_t c = 0; c < l.layout.chunks().size(); ++c) {
    const offload::Chunk& spec = l.layout.chunks()[c];  // the layout's chunk, not ChunkedEngine::Chunk
    Chunk& chunk = m.chunks[c];
    chunk.owner = chunk_owner[c];
    chunk.bytes = spec.bytes;
    if (held_here(c) && m.chunk_file) {
      chunk.host = torch::from_blob(m.chunk_file->data() + chunk.file_offset, {static_cast<int64_t>(spec.bytes)},
                                    torch::TensorOptions().dtype(at::kByte));
    } else if (held_here(c)) {
      chunk.host = transfers_->host_buffer(static_cast<int64_t>(spec.bytes));
      m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::weights, spec.bytes);
    }
    // Kept on the device between uses: every chunk under `optimizer`; under `params` the chunks
    // whose groups are all in options.kept_groups.
    chunk.keep = true;
    if (options_.policy != OffloadPolicy::optimizer) {
      for (int64_t g = spec.first_group; g <= spec.last_group; ++g) {
        for (const auto& [gname, gi] : l.index_of_group) {
          if (gi == g && std::find(options_.kept_groups.begin(), options_.kept_groups.end(), gname) ==
                             options_.kept_groups.end()) {
            chunk.keep = false;
          }
        }
      }
    }
  }
}

void ChunkedEngine::place_parameter(Model& m, size_t i, const ModelLayout& l, bool trainable, bool state_held,
                                    const c10::Device& device) {
  Param& p = m.params[i];
  const TensorPlacement& place = l.layout.placements()[i];
  const torch::Tensor& tensor = l.tensors[i];
  p.name = l.specs[i].name;
  p.parameter = tensor;
  p.chunk = place.chunk;
  p.only_group = l.specs[i].group;
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
  if (p.trainable && state_held) allocate_optimizer_state(m, p, tensor);
  // Gradient buffers on every process.
  if (p.trainable) allocate_gradient_buffers(m, p, tensor);
  // The model's own storage is freed here; the chunk buffers hold the weights from now on.
  p.parameter.set_data(p.placeholder);
}

void ChunkedEngine::allocate_optimizer_state(Model& m, Param& p, const torch::Tensor& tensor) {
  HostAdamState& state = p.state;
  const StateLayout layout = state_layout(tensor.scalar_type(), options_.master_weights, options_.optimizer_state,
                                          stochastic_rounding_seed(options_.rounding_seed, m.name, p.name));
  if (nvme_) {  // the NVMe tier keeps it all in its file; only fp32 weights are their own master here
    p.nvme_index = nvme_->add(layout, tensor.numel());
    return;
  }
  state.stochastic = layout.stochastic;  // the host chunk's bf16 weights are the master: no bytes of their own
  state.rounding_seed = layout.rounding_seed;
  if (layout.master_is_weights) {
    state.master = p.host_view;
  } else if (layout.compensation) {
    state.compensation = transfers_->host_zeros(tensor.sizes(), at::kBFloat16);  // master = the weights exactly
    m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::master, state.compensation.nbytes());
  } else if (layout.master) {
    state.master = p.host_view.to(at::kFloat);
    if (!transfers_->emulated()) state.master = transfers_->host_zeros(tensor.sizes(), at::kFloat).copy_(state.master);
    m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::master, state.master.nbytes());
  }
  allocate_moments(state, options_.optimizer_state, tensor,
                            [&](at::IntArrayRef sizes, at::ScalarType dtype) { return transfers_->host_zeros(sizes, dtype); });
  m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::moments, moment_bytes(tensor.numel()));
}

void ChunkedEngine::allocate_gradient_buffers(Model& m, Param& p, const torch::Tensor& tensor) {
  p.grad = transfers_->host_zeros(tensor.sizes(), at::kFloat);
  m.host_bytes.emplace_back(accountant_, MemoryTier::host, MemoryCategory::grads, p.grad.nbytes());
  if (!transfers_->emulated()) grow_staging_ring(tensor.nbytes());
}

void ChunkedEngine::grow_staging_ring(uint64_t bytes) {
  if (bytes <= staging_.slot_bytes) return;
  // Between steps (add_model): no copy is in flight into the old slots.
  staging_.slots.clear();
  for (size_t i = 0; i < kStagingSlots; ++i) staging_.slots.push_back(transfers_->host_buffer(static_cast<int64_t>(bytes)));
  staging_.last.assign(kStagingSlots, nullptr);
  staging_.next = 0;
  staging_.slot_bytes = bytes;
  staging_.held.reset();
  staging_.held.emplace(accountant_, MemoryTier::host, MemoryCategory::grads, kStagingSlots * bytes);
}

void ChunkedEngine::link_chunks_to_groups(Model& m, const std::vector<ParameterGroup>& groups,
                                          const std::map<std::string, int64_t>& index_of_group) {
  // Backward reaches a chunk's last user group last: then its gradients are complete.
  for (Chunk& chunk : m.chunks) chunk.last_group = m.num_groups;
  for (int64_t g = m.num_groups - 1; g >= 0; --g) {
    for (int64_t c : m.group_chunks[static_cast<size_t>(g)]) m.chunks[static_cast<size_t>(c)].last_group = g;
  }
  for (const Param& p : m.params) m.chunks[static_cast<size_t>(p.chunk)].trainable |= p.trainable;
  // A parameter another group also uses (a tied embedding) belongs to no single group.
  for (const auto& group : groups) {
    for (const std::string& other : group.also_uses) {
      for (Param& p : m.params) {
        if (p.only_group == index_of_group.at(other)) p.only_group = -1;
      }
    }
  }
}

uint64_t ChunkedEngine::host_bytes_needed(uint64_t chunk_bytes, const std::vector<torch::Tensor>& tensors,
                                          bool trainable, const std::vector<bool>& state_held) const {
  uint64_t bytes = chunk_bytes;
  uint64_t largest = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = tensors[i];
    if (!trainable || !t.requires_grad()) continue;
    const uint64_t n = static_cast<uint64_t>(t.numel());
    // The fp32 gradient accumulator (and on a GPU the staging ring, below); where this process
    // holds the optimizer state, moments and fp32 master weights unless the weights are fp32.
    bytes += n * 4;
    largest = std::max<uint64_t>(largest, t.nbytes());
    if (state_held[i] && !nvme_) {
      const StateLayout layout = state_layout(t.scalar_type(), options_.master_weights, options_.optimizer_state, 0);
      bytes += moment_bytes(t.numel()) + master_state_bytes(layout, t.numel());
    }
  }
  if (!transfers_->emulated() && largest > staging_.slot_bytes) bytes += kStagingSlots * (largest - staging_.slot_bytes);
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

std::unique_ptr<ActivationMeter> ChunkedEngine::meter_activations() {
  if (!transfers_->emulated()) return nullptr;
  return std::make_unique<ActivationMeter>(accountant_);
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
  for (MemoryTier tier : kAllMemoryTiers) {
    for (MemoryCategory category : kAllMemoryCategories) {
      const uint64_t bytes = accountant_.current(tier, category);
      if (bytes == 0) continue;
      const std::string where = tier == MemoryTier::device ? device
                                : tier == MemoryTier::host ? host
                                : "nvme (" + options_.nvme_dir +
                                      (category == MemoryCategory::weights ? ", mapped: paged in by the kernel)"
                                       : nvme_ && !nvme_->direct()        ? ", buffered IO: that filesystem has no O_DIRECT)"
                                                                          : ", direct IO)");
      report.lines.push_back({std::string(memory_category_name(category)), where, bytes});
    }
  }
  return report;
}

}  // namespace ferry::offload
