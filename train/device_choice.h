// The device and weight dtype a run trains on, from train.device and train.precision.
#pragma once

#include <torch/torch.h>

#include <algorithm>

#ifdef FERRY_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "core/config/config.h"
#include "core/error.h"
#include "src/dist/dist_env.h"

namespace ferry {

// auto -> a GPU when one is visible, else cpu. Asking for cuda without one is a ConfigError. The
// GPU is cuda:0, or in a data-parallel run cuda:(LOCAL_RANK mod the visible GPUs): each process of
// a machine its own while there are enough.
inline c10::Device training_device(Device device) {
  const bool cuda = torch::cuda::is_available();
  if (device == Device::cuda && !cuda) {
    throw ConfigError("train.device: cuda was asked for but no GPU is visible (use train.device=auto or cpu)");
  }
  if (device == Device::cuda || (device == Device::auto_ && cuda)) {
    const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    const auto index = static_cast<c10::DeviceIndex>(dist::read_dist_env().local_rank % std::max<int64_t>(gpus, 1));
#ifdef FERRY_WITH_CUDA
    c10::cuda::set_device(index);  // the current device: streams and kernels without a tensor's device
#endif
    return c10::Device(c10::kCUDA, index);
  }
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
