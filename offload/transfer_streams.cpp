// Host <-> device copies on a side stream (synchronous on the emulated CPU tier).
#include "offload/transfer_streams.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace ferry::offload {

TransferStreams::TransferStreams(c10::Device device) : device_(device) {
  if (device.is_cuda()) {
    const c10::impl::VirtualGuardImpl guard(device.type());
    side_ = guard.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  }
}

torch::Tensor TransferStreams::device_buffer(int64_t bytes) const {
  return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device_));
}

torch::Tensor TransferStreams::host_buffer(int64_t bytes) const {
  return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(!emulated()));
}

torch::Tensor TransferStreams::host_zeros(at::IntArrayRef shape, at::ScalarType dtype) const {
  return at::zeros(shape, at::TensorOptions().dtype(dtype).pinned_memory(!emulated()));
}

Transfer TransferStreams::record_on_side() {
  Transfer done;
  done.event_ = std::make_shared<c10::Event>(device_.type());
  done.event_->record(*side_);
  return done;
}

Transfer TransferStreams::to_device(const torch::Tensor& dst, const torch::Tensor& src) {
  return copy_on_side(dst, src, dst);
}

Transfer TransferStreams::to_host(const torch::Tensor& dst, const torch::Tensor& src) {
  return copy_on_side(dst, src, src);  // src may be freed by the caller right away
}

Transfer TransferStreams::copy_on_side(const torch::Tensor& dst, const torch::Tensor& src,
                                       const torch::Tensor& on_device) {
  if (emulated()) {
    dst.copy_(src);
    return {};
  }
  const c10::impl::VirtualGuardImpl guard(device_.type());
  // The side stream first waits for what compute has queued: a previous reader of a device
  // destination, or the kernel producing a device source.
  c10::Event queued(device_.type());
  queued.record(guard.getStream(device_));
  queued.block(*side_);
  {
    const c10::StreamGuard on_side(*side_);
    dst.copy_(src, /*non_blocking=*/true);
  }
  on_device.record_stream(*side_);  // the allocator keeps it until the copy is done
  return record_on_side();
}

void TransferStreams::wait_compute(const Transfer& transfer) {
  if (!transfer.pending()) return;
  const c10::impl::VirtualGuardImpl guard(device_.type());
  transfer.event_->block(guard.getStream(device_));
}

void TransferStreams::wait_host(const Transfer& transfer) {
  if (transfer.pending()) transfer.event_->synchronize();
}

void TransferStreams::synchronize() {
  if (emulated()) return;
  const c10::impl::VirtualGuardImpl guard(device_.type());
  guard.synchronizeDevice(device_.index());
}

}  // namespace ferry::offload
