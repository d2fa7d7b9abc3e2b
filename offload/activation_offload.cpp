// Checkpointed layer inputs to host memory and back (see activation_offload.h).
#include "offload/activation_offload.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "offload/accountant.h"
#include "offload/activation_meter.h"
#include "offload/transfer_streams.h"

namespace ferry::offload {

// What the offloader and its entries share: entries may outlive a call, not the accountant.
struct ActivationOffloader::Shared {
  explicit Shared(MemoryAccountant& a) : accountant(a) {}

  MemoryAccountant& accountant;
  // Backward may run on autograd's device thread; recursive because an entry may be destroyed
  // (and uncount itself) while its offloader holds the lock.
  std::recursive_mutex mutex;
  std::optional<TransferStreams> streams;  // made for the device of the first activation
  std::weak_ptr<Entry> last;               // the entry offloaded most recently
  uint64_t host_bytes = 0, host_peak = 0;
};

class ActivationOffloader::Entry {
 public:
  Entry(std::shared_ptr<Shared> shared, torch::Tensor host, at::IntArrayRef sizes, at::ScalarType dtype)
      : shared_(std::move(shared)), host_(std::move(host)), sizes_(sizes.vec()), dtype_(dtype) {}
  ~Entry() {
    std::lock_guard<std::recursive_mutex> lock(shared_->mutex);
    shared_->accountant.release(MemoryTier::host, MemoryCategory::activations, bytes());
    shared_->host_bytes -= bytes();
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  uint64_t bytes() const { return static_cast<uint64_t>(host_.nbytes()); }

 private:
  friend class ActivationOffloader;
  std::shared_ptr<Shared> shared_;
  torch::Tensor host_;                // (bytes) kUInt8, pinned on a GPU machine
  std::vector<int64_t> sizes_;
  at::ScalarType dtype_;
  std::weak_ptr<Entry> previous_;     // offloaded just before this one: fetched after it
  torch::Tensor device_;              // set between a prefetch and the fetch that hands it out
  Transfer to_device_;
};

ActivationOffloader::ActivationOffloader(MemoryAccountant& accountant)
    : shared_(std::make_shared<Shared>(accountant)) {}

ActivationOffloader::~ActivationOffloader() = default;

std::shared_ptr<ActivationOffloader::Entry> ActivationOffloader::offload(const torch::Tensor& activation) {
  const torch::Tensor source = activation.detach().contiguous();
  std::lock_guard<std::recursive_mutex> lock(shared_->mutex);
  if (!shared_->streams) shared_->streams.emplace(source.device());
  FERRY_CHECK(shared_->streams->device() == source.device(), "activation offload: an activation on ",
              source.device().str(), " after ones on ", shared_->streams->device().str());
  torch::Tensor host;
  {
    // Host memory, not the device's: the activation meter (CPU runs) must not count it.
    const ActivationMeter::Pause host_tier;
    host = shared_->streams->host_buffer(static_cast<int64_t>(source.nbytes()));
  }
  // The copy is queued behind the kernel that produced the activation; nothing waits for it: the
  // copy back is queued on the same side stream, after it.
  shared_->streams->to_host(host.view(source.scalar_type()).view(source.sizes()), source);
  auto entry = std::make_shared<Entry>(shared_, std::move(host), source.sizes(), source.scalar_type());
  entry->previous_ = shared_->last;
  shared_->last = entry;
  shared_->accountant.allocate(MemoryTier::host, MemoryCategory::activations, entry->bytes());
  shared_->host_bytes += entry->bytes();
  shared_->host_peak = std::max(shared_->host_peak, shared_->host_bytes);
  return entry;
}

torch::Tensor ActivationOffloader::fetch(Entry& entry) {
  std::lock_guard<std::recursive_mutex> lock(shared_->mutex);
  TransferStreams& streams = *shared_->streams;
  auto start = [&streams](Entry& e) {
    if (e.device_.defined()) return;
    e.device_ = at::empty(e.sizes_, at::TensorOptions().dtype(e.dtype_).device(streams.device()));
    e.to_device_ = streams.to_device(e.device_, e.host_.view(e.dtype_).view(e.sizes_));
  };
  start(entry);
  streams.wait_compute(entry.to_device_);
  torch::Tensor out = std::move(entry.device_);
  entry.device_ = torch::Tensor();
  entry.to_device_ = Transfer();
  if (const std::shared_ptr<Entry> previous = entry.previous_.lock()) start(*previous);
  return out;
}

uint64_t ActivationOffloader::host_bytes() const {
  std::lock_guard<std::recursive_mutex> lock(shared_->mutex);
  return shared_->host_bytes;
}

uint64_t ActivationOffloader::host_peak_bytes() const {
  std::lock_guard<std::recursive_mutex> lock(shared_->mutex);
  return shared_->host_peak;
}

}  // namespace ferry::offload
