// NvmeStateStore: the CPU optimizer's state kept on the NVMe tier (offload.optimizer_state_tier
// nvme) instead of host memory: each trainable parameter's HostAdamState buffers (fp32 master or
// Kahan compensation, fp32 or int8 moments; offload/host_adam_state.h) live in a working file
// under offload.nvme_dir (offload/direct_file.h), cut into windows of `window` parameters. A
// window's buffers are one record in the file: its slices of every buffer side by side, each
// 64-byte aligned, the record padded to the direct-IO alignment, so a window is one read and one
// write.
//
// for_each_window walks the windows of the given parameters in order with a ring of staging
// buffers: while the caller's function runs on window i (the CPU AdamW step), windows i+1 .. i+depth
// are being read and window i-1 written by the IO threads. The host memory it takes is the ring,
// (depth + 2) records, whatever the model's size: staging_bytes().
//
// A window never written holds zero moments and takes its master from the weights (the caller is
// told: refresh_master); after mark_master_stale (the weights were written) every window of the
// parameter is told so once. Nothing is written at start-up.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "offload/direct_file.h"
#include "offload/host_adam_state.h"
#include "offload/io_threads.h"

namespace ferry::offload {

struct NvmeOptions {
  std::filesystem::path dir;   // offload.nvme_dir
  uint64_t budget = 0;         // offload.nvme_memory (0: the free space less 10%)
  int64_t window = int64_t{1} << 20;  // parameters per record: a multiple of 2048
  int64_t read_ahead = 2;      // windows read ahead of the one being computed
  int io_threads = 4;
  bool direct_io = true;       // false: buffered IO (DirectFile's fallback) from the start
};

class NvmeStateStore {
 public:
  explicit NvmeStateStore(NvmeOptions options);

  // Registers one parameter's state; returns its index. Parameters added since the last seal()
  // get a file of their own there.
  int64_t add(const StateLayout& layout, int64_t numel);
  // Creates and reserves the file of the parameters added since the last seal (ConfigError naming
  // offload.nvme_dir / nvme_memory when it cannot).
  void seal();

  // Bytes of state held in the files, and of one parameter.
  uint64_t file_bytes() const { return file_bytes_; }
  uint64_t state_bytes(int64_t parameter) const;
  // Host bytes of the staging ring.
  uint64_t staging_bytes() const;
  // Whether every file is read and written with O_DIRECT (false: a filesystem without it).
  bool direct() const;
  const NvmeOptions& options() const { return options_; }

  void mark_master_stale(int64_t parameter);

  enum class Access {
    update,      // read, call, write back
    read_only,   // read, call (a checkpoint save)
    write_only,  // call on a zeroed record, write (a checkpoint load)
  };
  struct Window {
    int64_t parameter = 0;
    int64_t first = 0;  // index of the window's first element in the parameter
    int64_t size = 0;
    bool refresh_master = false;  // the master must be taken from the weights (fresh or stale)
  };
  // The state's buffers in the record are views in `state` (master_is_weights: left undefined for
  // the caller to set). The function runs on the calling thread.
  using WindowFn = std::function<void(const Window&, HostAdamState& state)>;
  void for_each_window(const std::vector<int64_t>& parameters, Access access, const WindowFn& fn);

 private:
  struct Parameter {
    StateLayout layout;
    int64_t numel = 0;
    size_t file = 0;
    uint64_t offset = 0;        // the first record's offset in its file
    uint64_t record_stride = 0; // bytes of a full window's record
    std::vector<bool> stored;   // per window: written at least once
    std::vector<bool> stale;    // per window: master to be taken from the weights
  };
  int64_t windows_of(const Parameter& p) const { return (p.numel + options_.window - 1) / options_.window; }
  uint64_t record_bytes(const StateLayout& layout, int64_t n) const;
  HostAdamState view(const StateLayout& layout, std::byte* record, int64_t n) const;

  NvmeOptions options_;
  std::vector<Parameter> parameters_;
  std::vector<std::unique_ptr<DirectFile>> files_;
  size_t sealed_ = 0;          // parameters_[0, sealed_) have their file
  uint64_t pending_bytes_ = 0; // of the unsealed parameters
  uint64_t file_bytes_ = 0;
  uint64_t largest_record_ = 0;
  uint64_t ring_record_ = 0;   // bytes of each ring buffer
  std::vector<AlignedBuffer> ring_;
  std::unique_ptr<IoThreads> io_;
};

// The window's slice of a parameter's weights (`weights`: the whole parameter, host, contiguous),
// with the window's state made whole: fp32 weights are their own master, and a fresh or stale
// window takes its master from them.
torch::Tensor window_weights(const torch::Tensor& weights, const NvmeStateStore::Window& window, HostAdamState& state);

}  // namespace ferry::offload
