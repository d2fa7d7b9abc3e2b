// ChunkedEngine's optimizer state as checkpoints hold it: each process its own shard under ZeRO,
// in the file's format (offload/host_adam_state.h decodes int8 moments and Kahan pairs; see
// chunked_engine.h and offload/optimizer_state_file.h).
#include "offload/chunked_engine.h"
#include "offload/mapped_chunk_file.h"
#include "offload/nvme_state_store.h"

#include <torch/torch.h>

#include <map>

namespace ferry::offload {

int64_t ChunkedEngine::step_count(const std::string& name) const { return model(name).steps; }

std::vector<ParameterStateRef> ChunkedEngine::state_refs(bool dequantized) const {
  std::vector<ParameterStateRef> refs;
  for (const auto& [name, m] : models_) {
    for (const Param& p : m.params) {
      if (!p.trainable || !owns(m.chunks[static_cast<size_t>(p.chunk)])) continue;
      refs.push_back(p.state.as_saved(name, p.name, p.host_view, dequantized));
    }
  }
  return refs;
}

void ChunkedEngine::save_state(const std::filesystem::path& dir) const {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = m.steps;
  }
  StateShard shard;
  if (sharded_state()) shard = {options_.shard_group->rank(), options_.shard_group->size()};
  if (nvme_) {
    save_nvme_state(dir, steps, shard);
  } else {
    save_optimizer_state(dir, std::string(enum_name(options_.policy)), state_refs(true), steps, shard);
  }
  for (const auto& [name, m] : models_) release_host(m);  // the masters were decoded from the weights
}

std::vector<std::pair<const std::string*, const ChunkedEngine::Param*>> ChunkedEngine::nvme_params() const {
  std::vector<std::pair<const std::string*, const Param*>> params;
  for (const auto& [name, m] : models_) {
    for (const Param& p : m.params) {
      if (p.nvme_index < 0) continue;
      const size_t index = static_cast<size_t>(p.nvme_index);
      if (params.size() <= index) params.resize(index + 1);
      params[index] = {&name, &p};
    }
  }
  return params;
}

namespace {

std::vector<int64_t> all_indices(size_t n) {
  std::vector<int64_t> indices(n);
  for (size_t i = 0; i < n; ++i) indices[i] = static_cast<int64_t>(i);
  return indices;
}

// The file's layout of those parameters' state (a master for all but fp32 weights).
template <class Params>
std::vector<ParameterStateShape> state_shapes(const Params& params) {
  std::vector<ParameterStateShape> shapes;
  for (const auto& [model, p] : params) {
    shapes.push_back({*model, p->name, p->host_view.sizes().vec(), p->host_view.scalar_type() != at::kFloat});
  }
  return shapes;
}

}  // namespace

// Written window by window in the file's format (fp32 moments and master), as save_optimizer_state
// writes the host tier's: a checkpoint resumes under either tier.
void ChunkedEngine::save_nvme_state(const std::filesystem::path& dir, const std::map<std::string, int64_t>& steps,
                                    const StateShard& shard) const {
  const auto params = nvme_params();
  OptimizerStateWriter out(dir, std::string(enum_name(options_.policy)), state_shapes(params), steps, shard);
  nvme_->for_each_window(all_indices(params.size()), NvmeStateStore::Access::read_only,
                         [&](const NvmeStateStore::Window& w, HostAdamState& state) {
                           const auto& [model, p] = params[static_cast<size_t>(w.parameter)];
                           const torch::Tensor weights = window_weights(p->host_view, w, state);
                           out.write(static_cast<size_t>(w.parameter), w.first, state.as_saved(*model, p->name, weights, true));
                         });
  out.commit();
}

void ChunkedEngine::load_nvme_state(const std::filesystem::path& dir, std::map<std::string, int64_t>& steps) {
  const auto params = nvme_params();
  const OptimizerStateReader reader(dir, state_shapes(params), steps);  // checks everything before any window is written
  nvme_->for_each_window(all_indices(params.size()), NvmeStateStore::Access::write_only,
                         [&](const NvmeStateStore::Window& w, HostAdamState& state) {
                           const auto& [model, p] = params[static_cast<size_t>(w.parameter)];
                           const torch::Tensor weights = window_weights(p->host_view, w, state);
                           const ParameterStateRef file = reader.state(static_cast<size_t>(w.parameter));
                           const auto slice = [&](const torch::Tensor& t) { return t.view(-1).narrow(0, w.first, w.size); };
                           ParameterStateRef own = state.as_saved(*model, p->name, weights, false);
                           own.exp_avg.copy_(slice(file.exp_avg));
                           own.exp_avg_sq.copy_(slice(file.exp_avg_sq));
                           if (own.master.defined() && file.master.defined()) own.master.copy_(slice(file.master));
                           state.restore_from_saved(own, weights);
                         });
}

void ChunkedEngine::load_state(const std::filesystem::path& dir) {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = 0;
  }
  if (nvme_) {
    load_nvme_state(dir, steps);
  } else {
    const std::vector<ParameterStateRef> refs = state_refs(false);
    load_optimizer_state(dir, refs, steps);
    size_t i = 0;
    for (auto& [name, m] : models_) {
      for (Param& p : m.params) {
        if (!p.trainable || !owns(m.chunks[static_cast<size_t>(p.chunk)])) continue;
        p.state.restore_from_saved(refs[i++], p.host_view);
      }
    }
  }
  for (const auto& [name, count] : steps) models_.at(name).steps = count;
  for (const auto& [name, m] : models_) release_host(m);
}

}  // namespace ferry::offload
