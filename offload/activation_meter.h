// ActivationMeter: counts the bytes a training step holds on the emulated device tier besides the
// engine's own (activations, logits, autograd's workspace, gradients in flight) as
// MemoryCategory::activations of the device tier in the engine's accountant, so that the
// accountant's device peak is everything a step holds — the number a GPU's caching allocator
// reports as its peak. CPU runs only (a GPU run reads the CUDA allocator instead).
//
// It listens to the CPU allocator through torch's memory-reporting hook (the one the profiler
// uses: a c10::MemoryReportingInfoBase in the thread's debug info) and counts every allocation
// made on the installing thread while it is installed (autograd's backward runs there too), until
// that allocation is freed. Tensors the engine counts itself (paged-in weights, gradients it
// takes) are handed over: the meter stops counting them. Work on the host tier (the CPU
// optimizer's temporaries) runs under a Pause. Allocations made on other threads are not seen.
#pragma once

#include <cstdint>
#include <memory>

namespace at {
class Tensor;
}

namespace ferry::offload {

class MemoryAccountant;

class ActivationMeter {
 public:
  // Starts counting this thread's CPU allocations into `accountant`. Meters nest (the innermost
  // counts); each must be destroyed on the thread that made it, innermost first.
  explicit ActivationMeter(MemoryAccountant& accountant);
  ~ActivationMeter();  // uncounts whatever is still live (the peak stays)

  ActivationMeter(const ActivationMeter&) = delete;
  ActivationMeter& operator=(const ActivationMeter&) = delete;

  uint64_t live_bytes() const;

  // The engine counts `tensor`'s memory itself from now on: the meter of this thread, if any,
  // stops counting it (a no-op for memory it does not count).
  static void hand_over(const at::Tensor& tensor);

  // While one exists, allocations on this thread are not counted (host-tier work).
  class Pause {
   public:
    Pause();
    ~Pause();
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;
  };

  class Reporter;

 private:
  std::shared_ptr<Reporter> reporter_;
  struct Installed;
  std::unique_ptr<Installed> installed_;
};

}  // namespace ferry::offload
