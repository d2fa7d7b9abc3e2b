// HostAdamState's update: picks the CPU AdamW kernel for the state's layout (fp32 or int8 moments,
// fp32 or Kahan master) and the weights' and gradient's dtypes.
#include "offload/host_adam_state.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "core/fnv1a.h"
#include "kernels/cpu/adamw_kahan.h"
#include "kernels/cpu/adamw_stochastic.h"

namespace ferry::offload {
namespace {

kernels::GradType grad_type_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return kernels::GradType::f32;
    case at::kBFloat16: return kernels::GradType::bf16;
    case at::kHalf: return kernels::GradType::f16;
    default: throw InternalError(std::string("HostAdamState: no CPU AdamW for gradients of dtype ") + c10::toString(dtype));
  }
}

kernels::WeightOutType weight_out_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return kernels::WeightOutType::bf16;
    case at::kHalf: return kernels::WeightOutType::f16;
    default: throw InternalError(std::string("HostAdamState: no CPU AdamW output for weights of dtype ") + c10::toString(dtype));
  }
}

}  // namespace

StateLayout state_layout(at::ScalarType weights, MasterWeights master, OptimizerState moments, uint64_t rounding_seed) {
  StateLayout layout;
  layout.moments = moments;
  if (weights == at::kFloat) {
    layout.master_is_weights = true;
  } else if (weights == at::kBFloat16 && master == MasterWeights::bf16_kahan) {
    layout.compensation = true;
  } else if (weights == at::kBFloat16 && master == MasterWeights::bf16_stochastic) {
    layout.stochastic = true;
    layout.rounding_seed = rounding_seed;
  } else {
    layout.master = true;
  }
  return layout;
}

uint64_t master_state_bytes(const StateLayout& layout, int64_t n) {
  const uint64_t count = static_cast<uint64_t>(n);
  return layout.master ? 4 * count : layout.compensation ? 2 * count : 0;
}

void HostAdamState::reset_master(const torch::Tensor& weights) {
  if (separate_master(weights)) master.copy_(weights);
  if (compensation.defined()) compensation.zero_();
}

kernels::Int8Moments HostAdamState::int8_view() const {
  return {exp_avg_codes.data_ptr<int8_t>(), exp_avg_scale.data_ptr<float>(), exp_avg_sq_codes.data_ptr<uint8_t>(),
          exp_avg_sq_scale.data_ptr<float>()};
}

void HostAdamState::update(const kernels::AdamWParams& params, const torch::Tensor& weights, const torch::Tensor& grad,
                           float grad_multiplier, kernels::ThreadPool* pool, int64_t first) {
  const int64_t n = weights.numel();
  const kernels::GradType grad_type = grad_type_of(grad.scalar_type());
  if (stochastic) {  // the bf16 weights alone are the master
    auto* weight = static_cast<uint16_t*>(weights.data_ptr());
    if (int8_moments()) {
      kernels::adamw_update_stochastic_int8(params, weight, int8_view(), grad.data_ptr(), grad_type, grad_multiplier, n,
                                            rounding_seed, first, pool);
    } else {
      kernels::adamw_update_stochastic(params, weight, exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(),
                                       grad.data_ptr(), grad_type, grad_multiplier, n, rounding_seed, first, pool);
    }
    return;
  }
  if (compensation.defined()) {  // the bf16 weights are the master, with their compensation
    auto* weight = static_cast<uint16_t*>(weights.data_ptr());
    auto* kahan = static_cast<uint16_t*>(compensation.data_ptr());
    if (int8_moments()) {
      kernels::adamw_update_kahan_int8(params, weight, kahan, int8_view(), grad.data_ptr(), grad_type, grad_multiplier,
                                       n, pool);
    } else {
      kernels::adamw_update_kahan(params, weight, kahan, exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(),
                                  grad.data_ptr(), grad_type, grad_multiplier, n, pool);
    }
    return;
  }
  const bool separate = separate_master(weights);
  float* fp32_master = master.defined() ? master.data_ptr<float>() : weights.data_ptr<float>();
  void* weight_out = separate ? weights.data_ptr() : nullptr;
  const kernels::WeightOutType out_type = separate ? weight_out_of(weights.scalar_type()) : kernels::WeightOutType::none;
  if (int8_moments()) {
    kernels::adamw_update_int8(params, fp32_master, int8_view(), grad.data_ptr(), grad_type, grad_multiplier,
                               weight_out, out_type, n, pool);
  } else {
    kernels::adamw_update(params, fp32_master, exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(), grad.data_ptr(),
                          grad_type, grad_multiplier, weight_out, out_type, n, pool);
  }
}

ParameterStateRef HostAdamState::as_saved(std::string model, std::string parameter, const torch::Tensor& weights,
                                          bool decoded) const {
  ParameterStateRef ref{std::move(model), std::move(parameter), exp_avg, exp_avg_sq,
                        separate_master(weights) ? master : torch::Tensor()};
  if (stochastic) {  // files hold the fp32 master: the weights' values, exactly
    ref.master = decoded ? weights.to(at::kFloat) : torch::zeros(weights.sizes(), at::kFloat);
  } else if (compensation.defined()) {  // files hold the fp32 master
    ref.master = torch::zeros(weights.sizes(), at::kFloat);
    if (decoded) {
      kernels::decode_kahan_master(static_cast<const uint16_t*>(weights.data_ptr()),
                                   static_cast<const uint16_t*>(compensation.data_ptr()), ref.master.data_ptr<float>(),
                                   weights.numel());
    }
  }
  if (int8_moments()) {  // files hold fp32 moments whatever the format
    ref.exp_avg = torch::zeros(weights.sizes(), at::kFloat);
    ref.exp_avg_sq = torch::zeros(weights.sizes(), at::kFloat);
    if (decoded) {
      kernels::dequantize_int8_moments(int8_view(), ref.exp_avg.data_ptr<float>(), ref.exp_avg_sq.data_ptr<float>(),
                                       weights.numel());
    }
  }
  return ref;
}

void HostAdamState::restore_from_saved(const ParameterStateRef& saved, const torch::Tensor& weights) {
  if (int8_moments()) {  // quantising the saved (dequantised) moments gives back the same codes
    kernels::quantize_int8_moments(saved.exp_avg.data_ptr<float>(), saved.exp_avg_sq.data_ptr<float>(), int8_view(),
                                   weights.numel());
  }
  if (compensation.defined()) {
    // The weights were loaded before (the checkpoint's bf16 w); c = bf16(master - w) gives the pair
    // whose value is the saved master exactly (kernels/cpu/adamw_kahan.h).
    const torch::Tensor residual = saved.master - weights.to(at::kFloat);
    compensation.copy_(residual.to(at::kBFloat16));
  }
}

uint64_t stochastic_rounding_seed(uint64_t run_seed, const std::string& model, const std::string& parameter) {
  Fnv1a hash;
  hash.add(model + "/" + parameter);
  return hash.state ^ (run_seed * 0x9e3779b97f4a7c15ull);
}

uint64_t host_moment_bytes(OptimizerState format, int64_t n) {
  return static_cast<uint64_t>(format == OptimizerState::int8 ? kernels::int8_moment_bytes(n) : 8 * n);
}

}  // namespace ferry::offload
