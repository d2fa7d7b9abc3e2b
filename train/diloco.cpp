// DiLoCo's outer loop (diloco.h).
#include "train/diloco.h"

#include <ATen/ATen.h>

#include <map>
#include <utility>

#include "core/error.h"
#include "src/io/safetensors.h"

namespace ferry {
namespace {

// Blockwise absmax int8: codes = round(x / s), s = max|x| / 127 per block of `block` values.
std::pair<torch::Tensor, torch::Tensor> encode_int8(const torch::Tensor& flat, int64_t block) {
  const int64_t n = flat.numel();
  const int64_t blocks = (n + block - 1) / block;
  torch::Tensor padded = at::zeros({blocks * block}, flat.options());
  padded.narrow(0, 0, n).copy_(flat);
  const torch::Tensor rows = padded.view({blocks, block});
  torch::Tensor scales = rows.abs().amax(1) / 127.0;
  const torch::Tensor safe = at::where(scales > 0, scales, at::ones_like(scales));
  const torch::Tensor codes = (rows / safe.unsqueeze(1)).round().clamp(-127, 127).to(at::kChar);
  return {codes.view({-1}), scales};
}

torch::Tensor decode_int8(const torch::Tensor& codes, const torch::Tensor& scales, int64_t n, int64_t block) {
  const torch::Tensor rows = codes.to(at::kFloat).view({scales.numel(), block}) * scales.unsqueeze(1);
  return rows.reshape({-1}).narrow(0, 0, n);
}

}  // namespace

DiLoCo::DiLoCo(const DistributedConfig& config, dist::Communicator& comm, offload::ParameterEngine& engine, std::string model)
    : config_(config), comm_(comm), engine_(engine), model_(std::move(model)) {}

void DiLoCo::start() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  names_.clear();
  numels_.clear();
  engine_.with_weights(model_, offload::ParameterEngine::WeightAccess::read, [&] {
    engine_.for_each_trainable(model_, [&](const std::string& name, const torch::Tensor& p) {
      names_.push_back(name);
      numels_.push_back(p.numel());
      parts.push_back(p.detach().reshape({-1}).to(at::kCPU, at::kFloat));
    });
  });
  FERRY_CHECK(!parts.empty(), "DiLoCo: model '", model_, "' has no trainable parameters");
  outer_ = at::cat(parts);
  if (!momentum_.defined() || momentum_.numel() != outer_.numel()) momentum_ = at::zeros_like(outer_);
}

torch::Tensor DiLoCo::average(const torch::Tensor& delta) {
  const double n = static_cast<double>(comm_.size());
  if (config_.pseudo_gradient == PseudoGradient::fp32) {
    torch::Tensor sum = delta.clone();
    comm_.all_reduce_sum({sum});
    return sum / n;
  }
  torch::Tensor sum = at::zeros_like(delta);
  if (config_.pseudo_gradient == PseudoGradient::bf16) {
    for (const torch::Tensor& part : comm_.all_gather(delta.to(at::kBFloat16))) sum += part.to(at::kFloat);
  } else {
    const auto [codes, scales] = encode_int8(delta, kInt8Block);
    const std::vector<torch::Tensor> all_codes = comm_.all_gather(codes);
    const std::vector<torch::Tensor> all_scales = comm_.all_gather(scales);
    for (size_t r = 0; r < all_codes.size(); ++r) {
      sum += decode_int8(all_codes[r], all_scales[r], delta.numel(), kInt8Block);
    }
  }
  return sum / n;  // summed in rank order: the same bits on every process
}

void DiLoCo::synchronize() {
  torch::NoGradGuard no_grad;
  FERRY_CHECK(outer_.defined(), "DiLoCo::synchronize before start()");
  std::vector<torch::Tensor> parts;
  engine_.with_weights(model_, offload::ParameterEngine::WeightAccess::read, [&] {
    engine_.for_each_trainable(model_, [&](const std::string&, const torch::Tensor& p) {
      parts.push_back(p.detach().reshape({-1}).to(at::kCPU, at::kFloat));
    });
  });
  const torch::Tensor delta = outer_ - at::cat(parts);
  const torch::Tensor mean = average(delta);
  const double mu = config_.outer_momentum;
  momentum_.mul_(mu).add_(mean);
  outer_.sub_((mean + mu * momentum_) * config_.outer_lr);
  ++outer_steps_;
  engine_.with_weights(model_, offload::ParameterEngine::WeightAccess::write, [&] {
    int64_t offset = 0;
    engine_.for_each_trainable(model_, [&](const std::string&, const torch::Tensor& p) {
      const int64_t n = p.numel();
      p.copy_(outer_.narrow(0, offset, n).view(p.sizes()));
      offset += n;
    });
  });
}

void DiLoCo::save(const std::filesystem::path& dir) const {
  io::TensorMap tensors{{"momentum", momentum_}};
  io::save_safetensors(dir / kStateFile, tensors,
                       {{"outer_steps", std::to_string(outer_steps_)},
                        {"pseudo_gradient", std::string(enum_name(config_.pseudo_gradient))}});
}

void DiLoCo::load(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / kStateFile;
  if (!std::filesystem::exists(file)) {
    throw InputError(file.string() + ": missing; this checkpoint was not saved by a distributed.mode diloco run "
                     "(resume it with distributed.mode sync, or start a new run)");
  }
  const io::SafetensorsFile state(file);
  if (!state.contains("momentum") || state.info("momentum").shape != std::vector<int64_t>{outer_.numel()} ||
      state.info("momentum").dtype != at::kFloat) {
    throw InputError(file.string() + ": 'momentum' does not fit this model's " + std::to_string(outer_.numel()) +
                     " trainable values");
  }
  momentum_ = state.load("momentum");
  const auto it = state.metadata().find("outer_steps");
  try {
    outer_steps_ = it == state.metadata().end() ? 0 : std::stoll(it->second);
  } catch (const std::exception&) {
    throw InputError(file.string() + ": metadata outer_steps is not a number");
  }
}

}  // namespace ferry
