// TransferStreams: the copies between host and device memory that the offload engine overlaps
// with compute, behind one small interface so the CPU-emulated device tier makes the same calls.
//
// On a GPU, copies run on a side stream taken from the device's pool: a copy to the device first
// waits for the work already queued on the compute stream (so it never overwrites a buffer still
// being read), and the compute stream waits for the copy's event before it uses the data. A copy
// to the host likewise follows the compute stream's queued work (the gradient being produced) and
// the host waits on its event before reading. Buffers handed to a side-stream copy are marked as
// used by that stream, so the caching allocator does not reuse them before the copy finishes.
// Host buffers are pinned, which is what makes the copies asynchronous.
//
// On the CPU (the emulated device tier) every copy is an ordinary synchronous copy and every
// wait returns at once. The calls are device-generic (c10::Stream / c10::Event), so this file
// compiles without CUDA headers; the CUDA runtime registers its implementation when present.
#pragma once

#include <torch/types.h>

#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <memory>
#include <optional>

namespace ferry::offload {

// One copy in flight; default-constructed: already complete.
class Transfer {
 public:
  Transfer() = default;
  bool pending() const { return event_ != nullptr; }

 private:
  friend class TransferStreams;
  std::shared_ptr<c10::Event> event_;
};

class TransferStreams {
 public:
  explicit TransferStreams(c10::Device device);

  c10::Device device() const { return device_; }
  bool emulated() const { return !side_.has_value(); }

  // Uninitialised byte buffers: on the device, and on the host (pinned when there is a GPU).
  torch::Tensor device_buffer(int64_t bytes) const;
  torch::Tensor host_buffer(int64_t bytes) const;
  // A host tensor of the given shape and dtype, zeroed, pinned when there is a GPU.
  torch::Tensor host_zeros(at::IntArrayRef shape, at::ScalarType dtype) const;

  // dst (device) <- src (host). The returned transfer must be waited on with wait_compute before
  // the compute stream reads dst.
  Transfer to_device(const torch::Tensor& dst, const torch::Tensor& src);
  // dst (host) <- src (device), after the work queued on the compute stream so far. Wait with
  // wait_host before reading dst on the host.
  Transfer to_host(const torch::Tensor& dst, const torch::Tensor& src);

  // Makes the compute stream wait for the transfer (no host block).
  void wait_compute(const Transfer& transfer);
  // Blocks the calling thread until the transfer is done.
  void wait_host(const Transfer& transfer);
  // Blocks until every queued copy and all compute work on the device are done.
  void synchronize();

 private:
  Transfer record_on_side();
  // dst <- src on the side stream after the compute stream's queued work; `on_device` (dst or
  // src) is marked as used by the side stream.
  Transfer copy_on_side(const torch::Tensor& dst, const torch::Tensor& src, const torch::Tensor& on_device);

  c10::Device device_;
  std::optional<c10::Stream> side_;  // unset on the CPU
};

}  // namespace ferry::offload
