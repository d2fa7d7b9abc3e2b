// The device and weight dtype a run trains on, from train.device and train.precision.
#pragma once

#include <torch/torch.h>

#include "src/config/config.h"
#include "src/core/error.h"

namespace ferry {

// auto -> cuda:0 when a GPU is visible, else cpu. Asking for cuda without one is a ConfigError.
inline c10::Device training_device(Device device) {
  const bool cuda = torch::cuda::is_available();
  if (device == Device::cuda && !cuda) {
    throw ConfigError("train.device: cuda was asked for but no GPU is visible (use train.device=auto or cpu)");
  }
  if (device == Device::cuda || (device == Device::auto_ && cuda)) return c10::Device(c10::kCUDA, 0);
  return c10::Device(c10::kCPU);
}

// The dtype of the model's weights; bf16/fp16 runs keep fp32 master weights in the engine.
inline at::ScalarType weight_dtype(Precision precision) {
  switch (precision) {
    case Precision::bf16: return at::kBFloat16;
    case Precision::fp16: return at::kHalf;
    default: return at::kFloat;
  }
}

}  // namespace ferry
