// Reentrant activation checkpointing as a custom autograd Function.
#include "train/activation_checkpoint.h"

#include <ATen/core/ivalue.h>

#include "core/error.h"
#include "offload/activation_offload.h"

namespace ferry {
namespace {

// What backward needs besides the saved input: the function, the hooks and the RNG state. Held
// by the autograd context as a capsule.
struct Recompute : torch::CustomClassHolder {
  std::function<torch::Tensor(const torch::Tensor&)> fn;
  std::function<void()> before_recompute, after_backward;
  torch::Tensor cpu_rng_state;
  torch::Tensor cuda_rng_state;  // undefined unless the layer runs on a GPU
  c10::Device device{c10::kCPU};
  // With activation offload: where the input waits for backward (instead of a saved variable).
  offload::ActivationOffloader* offloader = nullptr;
  std::shared_ptr<offload::ActivationOffloader::Entry> offloaded;
};

// Runs `body` with the global generators set to the states saved in `state`, then puts back the
// states they had, so recomputation consumes no randomness of the run.
template <class Body>
void with_saved_rng(const Recompute& state, Body&& body) {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  const torch::Tensor cpu_now = cpu.get_state();
  cpu.set_state(state.cpu_rng_state);
  std::optional<at::Generator> cuda;
  torch::Tensor cuda_now;
  if (state.cuda_rng_state.defined()) {
    cuda = at::globalContext().defaultGenerator(state.device);
    cuda_now = cuda->get_state();
    cuda->set_state(state.cuda_rng_state);
  }
  body();
  cpu.set_state(cpu_now);
  if (cuda) cuda->set_state(cuda_now);
}

class CheckpointedFunction : public torch::autograd::Function<CheckpointedFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               c10::intrusive_ptr<Recompute> state) {
    state->cpu_rng_state = at::detail::getDefaultCPUGenerator().get_state();
    state->device = hidden.device();
    if (hidden.is_cuda()) state->cuda_rng_state = at::globalContext().defaultGenerator(hidden.device()).get_state();
    torch::Tensor out;
    {
      torch::NoGradGuard no_grad;
      out = state->fn(hidden);
    }
    if (state->offloader != nullptr) {
      state->offloaded = state->offloader->offload(hidden);
    } else {
      ctx->save_for_backward({hidden});
    }
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["state"].toCapsule());
    if (state->before_recompute) state->before_recompute();
    // Fetched after the group's parameters are asked for, so the copy back overlaps their paging.
    torch::Tensor input = (state->offloaded ? state->offloader->fetch(*state->offloaded)
                                            : ctx->get_saved_variables()[0])
                              .detach()
                              .requires_grad_(true);
    torch::Tensor out;
    with_saved_rng(*state, [&] {
      torch::AutoGradMode enable(true);
      out = state->fn(input);
    });
    // Nothing inside needs a gradient (a frozen group whose input is not differentiable either).
    if (out.requires_grad()) torch::autograd::backward({out}, {grad_outputs[0]});
    if (state->after_backward) state->after_backward();
    return {input.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(std::function<torch::Tensor(const torch::Tensor&)> fn, const torch::Tensor& input,
                           std::function<void()> before_recompute, std::function<void()> after_backward,
                           offload::ActivationOffloader* offloader) {
  if (!torch::GradMode::is_enabled()) return fn(input);
  // The Function's output needs an input that requires grad, or backward would never reach the
  // group's parameters: give it a leaf whose gradient is dropped.
  const torch::Tensor leaf = input.requires_grad() ? input : input.detach().requires_grad_(true);
  auto state = c10::make_intrusive<Recompute>();
  state->fn = std::move(fn);
  state->before_recompute = std::move(before_recompute);
  state->after_backward = std::move(after_backward);
  state->offloader = offloader;
  return CheckpointedFunction::apply(leaf, std::move(state));
}

}  // namespace ferry
