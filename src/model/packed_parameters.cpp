// Packing parameters into one buffer per dtype (see packed_parameters.h).
#include "src/model/packed_parameters.h"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <map>

namespace ferry {
namespace {

constexpr int64_t kPageBytes = 4096;

int64_t page_multiple(int64_t bytes) { return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes; }

}  // namespace

void pack_parameters(const std::vector<at::Tensor>& parameters) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& p : parameters) {
    if (p.defined() && p.device().is_cpu() && p.numel() > 0) by_dtype[p.scalar_type()].push_back(p);
  }
  torch::NoGradGuard no_grad;
  for (auto& [dtype, list] : by_dtype) {
    int64_t total = 0;
    for (const at::Tensor& p : list) total += page_multiple(static_cast<int64_t>(p.nbytes()));
    // The allocator aligns to 64 bytes: take one page more and start at the first page boundary.
    const at::Tensor buffer = torch::empty({total + kPageBytes}, torch::TensorOptions().dtype(torch::kUInt8));
    const auto base = reinterpret_cast<uintptr_t>(buffer.data_ptr());
    int64_t offset = static_cast<int64_t>((kPageBytes - base % kPageBytes) % kPageBytes);
    for (at::Tensor p : list) {
      const int64_t bytes = static_cast<int64_t>(p.nbytes());
      const at::Tensor view = buffer.narrow(0, offset, bytes).view(dtype).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
      offset += page_multiple(bytes);
    }
  }
}

void pack_parameters(torch::nn::Module& module) { pack_parameters(module.parameters()); }

}  // namespace ferry
