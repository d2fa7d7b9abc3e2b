// The NVMe tier's optimizer state: record layout, files and the pipelined walk over windows (see
// nvme_state_store.h).
#include "offload/nvme_state_store.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <future>
#include <string>

#include "core/byte_size.h"
#include "core/error.h"
#include "kernels/cpu/adamw_int8.h"
#include "kernels/cpu/adamw_stochastic.h"

namespace ferry::offload {
namespace {

constexpr uint64_t kSubAlignment = 64;  // each buffer of a record starts on a cache line

uint64_t align_sub(uint64_t bytes) { return (bytes + kSubAlignment - 1) / kSubAlignment * kSubAlignment; }

// The buffers of a record of n parameters in order: (dtype, element count).
std::vector<std::pair<at::ScalarType, int64_t>> record_buffers(const StateLayout& layout, int64_t n) {
  std::vector<std::pair<at::ScalarType, int64_t>> buffers;
  if (layout.master) buffers.emplace_back(at::kFloat, n);
  if (layout.compensation) buffers.emplace_back(at::kBFloat16, n);
  if (layout.moments == OptimizerState::int8) {
    const int64_t blocks = kernels::int8_moment_blocks(n);
    buffers.emplace_back(at::kChar, n);
    buffers.emplace_back(at::kByte, n);
    buffers.emplace_back(at::kFloat, blocks);
    buffers.emplace_back(at::kFloat, blocks);
  } else {
    buffers.emplace_back(at::kFloat, n);
    buffers.emplace_back(at::kFloat, n);
  }
  return buffers;
}

// Waits for every future, keeping the first exception, which it rethrows at the end: no IO may
// outlive the buffers it uses.
void wait_all(std::vector<std::future<void>>& pending) {
  std::exception_ptr first;
  for (std::future<void>& f : pending) {
    if (!f.valid()) continue;
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace

NvmeStateStore::NvmeStateStore(NvmeOptions options) : options_(std::move(options)) {
  FERRY_CHECK(options_.window > 0 && options_.window % kernels::kStochasticTile == 0, "NVMe window ", options_.window,
              " is not a positive multiple of ", kernels::kStochasticTile);
  FERRY_CHECK(options_.read_ahead >= 1 && options_.io_threads >= 1, "NVMe read-ahead and IO threads must be >= 1");
  // The folder is checked before anything is allocated, so a bad one fails the run at once.
  check_nvme_folder(options_.dir);
}

uint64_t NvmeStateStore::record_bytes(const StateLayout& layout, int64_t n) const {
  uint64_t bytes = 0;
  for (const auto& [dtype, count] : record_buffers(layout, n)) {
    bytes += align_sub(static_cast<uint64_t>(count) * c10::elementSize(dtype));
  }
  return round_up_to_alignment(bytes);
}

HostAdamState NvmeStateStore::view(const StateLayout& layout, std::byte* record, int64_t n) const {
  std::vector<torch::Tensor> views;
  uint64_t at = 0;
  for (const auto& [dtype, count] : record_buffers(layout, n)) {
    views.push_back(torch::from_blob(record + at, {count}, torch::TensorOptions().dtype(dtype)));
    at += align_sub(static_cast<uint64_t>(count) * c10::elementSize(dtype));
  }
  HostAdamState state;
  size_t i = 0;
  if (layout.master) state.master = views[i++];
  if (layout.compensation) state.compensation = views[i++];
  state.stochastic = layout.stochastic;
  state.rounding_seed = layout.rounding_seed;
  if (layout.moments == OptimizerState::int8) {
    state.exp_avg_codes = views[i++];
    state.exp_avg_sq_codes = views[i++];
    state.exp_avg_scale = views[i++];
    state.exp_avg_sq_scale = views[i++];
  } else {
    state.exp_avg = views[i++];
    state.exp_avg_sq = views[i++];
  }
  return state;
}

int64_t NvmeStateStore::add(const StateLayout& layout, int64_t numel) {
  Parameter p;
  p.layout = layout;
  p.numel = numel;
  p.file = files_.size();
  p.offset = pending_bytes_;
  p.record_stride = record_bytes(layout, std::min(numel, options_.window));
  const int64_t windows = windows_of(p);
  p.stored.assign(static_cast<size_t>(windows), false);
  p.stale.assign(static_cast<size_t>(windows), false);
  largest_record_ = std::max(largest_record_, p.record_stride);
  pending_bytes_ += p.record_stride * static_cast<uint64_t>(windows);  // the last record is padded to a full one
  parameters_.push_back(std::move(p));
  return static_cast<int64_t>(parameters_.size()) - 1;
}

void NvmeStateStore::seal() {
  if (sealed_ == parameters_.size()) return;
  const uint64_t total = file_bytes_ + pending_bytes_;
  if (options_.budget > 0 && total > options_.budget) {
    throw ConfigError("the optimizer state on the NVMe tier needs " + format_bytes_approx(total) +
                      ", more than offload.nvme_memory " + format_bytes_approx(options_.budget) +
                      ": raise offload.nvme_memory (0: the free space of offload.nvme_dir less 10%)");
  }
  auto file = std::make_unique<DirectFile>(options_.dir, options_.direct_io);  // a bad folder fails here
  if (options_.budget == 0) {
    const int64_t free = free_disk_bytes(options_.dir);
    if (free >= 0 && static_cast<double>(pending_bytes_) > 0.9 * static_cast<double>(free)) {
      throw ConfigError("the optimizer state on the NVMe tier needs " + format_bytes_approx(pending_bytes_) +
                        " more, and offload.nvme_dir '" + options_.dir.string() + "' has " +
                        format_bytes_approx(static_cast<uint64_t>(free)) +
                        " free (offload.nvme_memory 0 uses at most 90% of it): free disk space or point "
                        "offload.nvme_dir at a larger drive");
    }
  }
  file->reserve(pending_bytes_);
  files_.push_back(std::move(file));
  file_bytes_ = total;
  pending_bytes_ = 0;
  sealed_ = parameters_.size();
  const size_t slots = static_cast<size_t>(options_.read_ahead + 2);
  if (ring_record_ < largest_record_) {  // sized for the largest record of every file so far
    ring_.clear();
    for (size_t i = 0; i < slots; ++i) ring_.push_back(aligned_buffer(largest_record_));
    ring_record_ = largest_record_;
  }
  if (!io_) io_ = std::make_unique<IoThreads>(options_.io_threads);
}

uint64_t NvmeStateStore::state_bytes(int64_t parameter) const {
  const Parameter& p = parameters_.at(static_cast<size_t>(parameter));
  return p.record_stride * static_cast<uint64_t>(windows_of(p));
}

uint64_t NvmeStateStore::staging_bytes() const {
  return ring_.size() * std::max(round_up_to_alignment(ring_record_), kDirectIoAlignment);
}

bool NvmeStateStore::direct() const {
  return std::all_of(files_.begin(), files_.end(), [](const auto& f) { return f->direct(); });
}

void NvmeStateStore::mark_master_stale(int64_t parameter) {
  Parameter& p = parameters_.at(static_cast<size_t>(parameter));
  std::fill(p.stale.begin(), p.stale.end(), true);
}

void NvmeStateStore::for_each_window(const std::vector<int64_t>& parameters, Access access, const WindowFn& fn) {
  FERRY_CHECK(sealed_ == parameters_.size(), "NvmeStateStore: seal() before use");
  struct Item {
    Parameter* p;
    int64_t parameter, window, first, size;
    uint64_t offset, bytes;
  };
  std::vector<Item> items;
  for (int64_t index : parameters) {
    Parameter& p = parameters_.at(static_cast<size_t>(index));
    for (int64_t w = 0; w < windows_of(p); ++w) {
      const int64_t first = w * options_.window;
      const int64_t size = std::min(options_.window, p.numel - first);
      items.push_back({&p, index, w, first, size, p.offset + p.record_stride * static_cast<uint64_t>(w),
                       record_bytes(p.layout, size)});
    }
  }
  const size_t slots = ring_.size();
  const size_t depth = slots - 2;
  std::vector<std::future<void>> reads(slots), writes(slots);
  const auto start_read = [&](size_t j) {
    const size_t slot = j % slots;
    if (writes[slot].valid()) writes[slot].get();  // the slot's last record is on disk
    const Item& it = items[j];
    if (access == Access::write_only || !it.p->stored[static_cast<size_t>(it.window)]) return;
    const DirectFile* file = files_[it.p->file].get();
    std::byte* buffer = ring_[slot].get();
    reads[slot] = io_->submit([file, buffer, it] { file->read(it.offset, buffer, it.bytes); });
  };
  try {
    for (size_t j = 0; j < std::min(depth, items.size()); ++j) start_read(j);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i + depth < items.size()) start_read(i + depth);
      const size_t slot = i % slots;
      const Item& it = items[i];
      const size_t w = static_cast<size_t>(it.window);
      const bool fresh = access == Access::write_only || !it.p->stored[w];
      if (reads[slot].valid()) reads[slot].get();
      if (fresh) std::memset(ring_[slot].get(), 0, it.bytes);  // zero moments (int8: zero scales too)
      HostAdamState state = view(it.p->layout, ring_[slot].get(), it.size);
      fn(Window{it.parameter, it.first, it.size, fresh || it.p->stale[w]}, state);
      if (access == Access::read_only) continue;
      const DirectFile* file = files_[it.p->file].get();
      const std::byte* buffer = ring_[slot].get();
      writes[slot] = io_->submit([file, buffer, it] { file->write(it.offset, buffer, it.bytes); });
      it.p->stored[w] = true;
      it.p->stale[w] = false;
    }
  } catch (...) {
    try {
      wait_all(reads);
      wait_all(writes);
    } catch (...) {
    }
    throw;
  }
  wait_all(reads);
  wait_all(writes);
}

torch::Tensor window_weights(const torch::Tensor& weights, const NvmeStateStore::Window& window, HostAdamState& state) {
  const torch::Tensor slice = weights.view(-1).narrow(0, window.first, window.size);
  if (slice.scalar_type() == at::kFloat) state.master = slice;
  if (window.refresh_master) state.reset_master(slice);
  return slice;
}

}  // namespace ferry::offload
