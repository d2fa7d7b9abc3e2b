// ChunkedEngine's optimizer state as checkpoints hold it: each process its own shard under ZeRO,
// in the file's format (offload/host_adam_state.h decodes int8 moments and Kahan pairs; see
// chunked_engine.h and offload/optimizer_state_file.h).
#include "offload/chunked_engine.h"

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
  save_optimizer_state(dir, std::string(enum_name(options_.policy)), state_refs(true), steps, shard);
}

void ChunkedEngine::load_state(const std::filesystem::path& dir) {
  std::map<std::string, int64_t> steps;
  for (const auto& [name, m] : models_) {
    if (m.trainable) steps[name] = 0;
  }
  const std::vector<ParameterStateRef> refs = state_refs(false);
  load_optimizer_state(dir, refs, steps);
  size_t i = 0;
  for (auto& [name, m] : models_) {
    for (Param& p : m.params) {
      if (!p.trainable || !owns(m.chunks[static_cast<size_t>(p.chunk)])) continue;
      p.state.restore_from_saved(refs[i++], p.host_view);
    }
  }
  for (const auto& [name, count] : steps) models_.at(name).steps = count;
}

}  // namespace ferry::offload
