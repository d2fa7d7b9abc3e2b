// ChunkedEngine's paging: which chunks are resident, page-ins (a broadcast from the owner under
// ZeRO 3) and page-outs around each group of a forward or backward, make_resident, and
// with_weights (see chunked_engine.h).
#include "offload/chunked_engine.h"
#include "offload/mapped_chunk_file.h"
#include "offload/nvme_state_store.h"

#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/engine_models.h"

namespace ferry::offload {
namespace {


bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

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
  ch.device_bytes = MemoryReservation(accountant_, MemoryTier::device, MemoryCategory::weights, bytes);
  ch.device = transfers_->device_buffer(static_cast<int64_t>(bytes));
  ActivationMeter::hand_over(ch.device);  // counted as weights above
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
  if (m.chunk_file) {  // the mapped bytes are read: their pages may go
    transfers_->wait_host(ch.arrival);
    release_host(m, ch);
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

void ChunkedEngine::with_weights(const std::string& name, WeightAccess access, const std::function<void()>& fn) {
  Model& m = model(name);
  if (transfers_) transfers_->synchronize();
  // zero_stage 3: the other processes' chunks are gathered into temporary host buffers.
  std::vector<torch::Tensor> gathered(m.chunks.size());
  if (sharded_weights()) {
    std::vector<dist::OwnedTensor> chunks;
    for (size_t c = 0; c < m.chunks.size(); ++c) {
      Chunk& ch = m.chunks[c];
      if (!owns(ch)) gathered[c] = torch::empty({static_cast<int64_t>(ch.bytes)}, torch::dtype(at::kByte));
      chunks.push_back({owns(ch) ? ch.host : gathered[c], ch.owner});
    }
    dist::broadcast_from_owners(*options_.shard_group, chunks);
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
  if (access == WeightAccess::read) {
    release_host(m);
    return;
  }
  torch::NoGradGuard no_grad;
  for (Param& p : m.params) {
    if (p.trainable) p.state.reset_master(p.host_view);  // the written weights are the master
    if (p.nvme_index >= 0) nvme_->mark_master_stale(p.nvme_index);
  }
  for (size_t c = 0; c < m.chunks.size(); ++c) {
    Chunk& ch = m.chunks[c];
    if (!ch.device.defined()) continue;
    ch.arrival = transfers_->to_device(ch.device, gathered[c].defined() ? gathered[c] : ch.host);
    transfers_->wait_compute(ch.arrival);
  }
  if (transfers_) transfers_->synchronize();  // the gathered buffers are read by those copies
  release_host(m);
}

}  // namespace ferry::offload
