// ChunkedEngine's gradients and step: the hook that streams each fresh gradient to the host, the
// fp32 host accumulators, the last backward's overlapped finishing (and with offload.overlap_step
// the update) on the background worker, the reduction over processes (ZeRO), the norm, and CPU
// AdamW on the host chunks (see chunked_engine.h).
#include "offload/chunked_engine.h"
#include "offload/mapped_chunk_file.h"
#include "offload/nvme_state_store.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/thread_pool.h"

namespace ferry::offload {
namespace {


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

}  // namespace

void ChunkedEngine::attach_gradient_hooks(Model& m, const std::string* model_key) {
  for (Param& p : m.params) {
    if (p.trainable) {
      torch::autograd::impl::set_post_acc_grad_hooks(p.parameter, std::make_unique<GradientStreamHook>(this, model_key, &p));
    }
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
  ActivationMeter::hand_over(gradient);  // counted as a gradient until it is copied
  accountant_.allocate(MemoryTier::device, MemoryCategory::grads, bytes);
  if (transfers_->emulated()) {
    accumulate(p, gradient);
  } else {
    drain_gradient(p);  // p's previous copy is folded in
    // The next ring slot: the copy it took last is folded in before it takes this one.
    const size_t slot = staging_.next;
    staging_.next = (slot + 1) % kStagingSlots;
    if (Param* previous = staging_.last[slot]) drain_gradient(*previous);
    staging_.last[slot] = &p;
    p.staging = staging_.slots[slot]
                    .narrow(0, 0, static_cast<int64_t>(bytes))
                    .view(gradient.scalar_type())
                    .view(gradient.sizes());
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
  if (!worker_) worker_ = std::make_unique<BackgroundWorker>();
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
  // The chunk's copies in flight are folded in here, on the calling thread: the staging ring is
  // the calling thread's alone (receive_gradient reuses slots), never the worker's.
  for (size_t i : m.chunks[static_cast<size_t>(chunk)].params) drain_gradient(m.params[i]);
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
  if (!owns(ch)) return false;  // its owner updates it and sends the new weights
  std::vector<Param*> params_with_grads;
  for (size_t i : ch.params) {
    Param& p = m.params[i];
    // Unused in this step: left alone, as torch's optimizers do.
    if (p.trainable && p.has_grad) params_with_grads.push_back(&p);
  }
  if (nvme_) {
    update_on_nvme(params_with_grads, params, grad_multiplier);
  } else {
    for (Param* p : params_with_grads) {
      params.weight_decay = p->decay ? options_.weight_decay : 0.0;
      p->state.update(params, p->host_view, p->grad, static_cast<float>(grad_multiplier), pool_.get());
    }
  }
  return !params_with_grads.empty();
}

void ChunkedEngine::update_on_nvme(const std::vector<Param*>& params, kernels::AdamWParams adamw,
                                   double grad_multiplier) {
  std::vector<int64_t> indices;
  std::map<int64_t, Param*> by_index;
  for (Param* p : params) {
    indices.push_back(p->nvme_index);
    by_index[p->nvme_index] = p;
  }
  nvme_->for_each_window(indices, NvmeStateStore::Access::update,
                         [&](const NvmeStateStore::Window& w, HostAdamState& state) {
                           Param& p = *by_index.at(w.parameter);
                           const torch::Tensor weights = window_weights(p.host_view, w, state);
                           const torch::Tensor grad = p.grad.view(-1).narrow(0, w.first, w.size);
                           adamw.weight_decay = p.decay ? options_.weight_decay : 0.0;
                           state.update(adamw, weights, grad, static_cast<float>(grad_multiplier), pool_.get(), w.first);
                         });
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
  std::vector<dist::OwnedTensor> grads;
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
  dist::ShardGroup& group = *options_.shard_group;
  if (options_.zero_stage < 2 || !sharded_state()) {
    std::vector<torch::Tensor> all;
    for (const auto& g : grads) all.push_back(g.tensor);
    group.all_reduce_sum(all);
    return;
  }
  dist::reduce_to_owners(group, grads);
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
  if (sharded_state() && options_.zero_stage >= 2) sum_of_squares = dist::sum_over_processes(*options_.shard_group, sum_of_squares);
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
      if (updated && m->chunk_file) {
        transfers_->wait_host(ch.arrival);
        release_host(*m, ch);
      }
    }
    if (sharded_state()) {
      // Every owner sends the new values of the trainable tensors it updated (frozen ones, e.g. a
      // LoRA base sharing the chunk, never change). Stage 1-2: host to host, then the others'
      // resident device copies follow. Stage 3: device to device, resident chunks only (a paged-out
      // one is sent whole at its next page-in).
      if (sharded_weights()) {
        for (Chunk& ch : m->chunks) transfers_->wait_compute(ch.arrival);  // the owners' device copies
      }
      std::vector<dist::OwnedTensor> updated;
      for (Chunk& ch : m->chunks) {
        if (!ch.trainable || (sharded_weights() && !ch.device.defined())) continue;
        for (size_t i : ch.params) {
          const Param& p = m->params[i];
          if (!p.trainable) continue;
          updated.push_back({sharded_weights() ? device_view(ch, p) : p.host_view, ch.owner});
        }
      }
      dist::broadcast_from_owners(*options_.shard_group, updated);
      for (Chunk& ch : m->chunks) {
        if (!sharded_weights() && ch.trainable && !owns(ch) && ch.device.defined()) {
          ch.arrival = transfers_->to_device(ch.device, ch.host);
        }
      }
    }
    for (Chunk& ch : m->chunks) transfers_->wait_compute(ch.arrival);
  }
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

}  // namespace ferry::offload
