// The activation meter (see activation_meter.h).
#include "offload/activation_meter.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/util/Logging.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <mutex>

#include "offload/accountant.h"
#include "offload/block_table.h"

namespace ferry::offload {
namespace {
thread_local int pause_depth = 0;
}  // namespace

class ActivationMeter::Reporter : public c10::MemoryReportingInfoBase {
 public:
  explicit Reporter(MemoryAccountant& accountant) : accountant_(accountant) {}

  bool memoryProfilingEnabled() const override { return true; }

  void reportMemoryUsage(void* ptr, int64_t alloc_size, size_t /*total_allocated*/, size_t /*total_reserved*/,
                         c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU || alloc_size == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (alloc_size > 0) {
      // An address seen again was freed where the meter could not see it (another thread).
      forget_locked(ptr);
      if (pause_depth > 0) return;
      live_.insert(ptr, static_cast<uint64_t>(alloc_size));
      live_bytes_ += static_cast<uint64_t>(alloc_size);
      accountant_.allocate(MemoryTier::device, MemoryCategory::activations, static_cast<uint64_t>(alloc_size));
    } else {
      forget_locked(ptr);
    }
  }

  void forget(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    forget_locked(ptr);
  }

  void forget_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_bytes_ > 0) accountant_.release(MemoryTier::device, MemoryCategory::activations, live_bytes_);
    live_.clear();
    live_bytes_ = 0;
  }

  uint64_t live_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_bytes_;
  }

 private:
  void forget_locked(const void* ptr) {
    const uint64_t bytes = live_.take(ptr);
    if (bytes == 0) return;
    live_bytes_ -= bytes;
    accountant_.release(MemoryTier::device, MemoryCategory::activations, bytes);
  }

  MemoryAccountant& accountant_;
  mutable std::mutex mutex_;
  BlockTable live_;
  uint64_t live_bytes_ = 0;
};

struct ActivationMeter::Installed {
  c10::DebugInfoGuard guard;
  // Torch logs a warning when a block allocated before the meter was installed is freed under it
  // ("memory block of unknown size"); that is expected here, so warnings are quiet meanwhile.
  int log_level = FLAGS_caffe2_log_level;

  explicit Installed(std::shared_ptr<Reporter> reporter)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::move(reporter)) {
    FLAGS_caffe2_log_level = std::max(log_level, 2);  // errors only
  }
  ~Installed() { FLAGS_caffe2_log_level = log_level; }
};

ActivationMeter::ActivationMeter(MemoryAccountant& accountant)
    : reporter_(std::make_shared<Reporter>(accountant)), installed_(std::make_unique<Installed>(reporter_)) {}

ActivationMeter::~ActivationMeter() {
  installed_.reset();
  reporter_->forget_all();
}

uint64_t ActivationMeter::live_bytes() const { return reporter_->live_bytes(); }

void ActivationMeter::hand_over(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  auto* reporter = dynamic_cast<Reporter*>(c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE));
  if (reporter != nullptr) reporter->forget(tensor.storage().data_ptr().get());
}

ActivationMeter::Pause::Pause() { ++pause_depth; }
ActivationMeter::Pause::~Pause() { --pause_depth; }

}  // namespace ferry::offload
