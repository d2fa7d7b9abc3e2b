// ActivationOffloader (train.activation_offload): the inputs that activation checkpointing saves
// for each decoder layer — one (B, T, C) tensor per layer, the only activations a checkpointed
// layer keeps between its forward and its backward — go to host memory as soon as the layer's
// forward has run, and come back one layer ahead of backward. So the device holds at most two
// layers' checkpoints (the one being recomputed and the one being fetched) instead of all of them,
// for one copy each way per layer that runs on the transfer side stream behind the compute.
//
// On a GPU the host copies are pinned and the copies overlap compute (TransferStreams). On the
// emulated device tier (a CPU run) they are ordinary copies: the host copy is made outside the
// activation meter, so it is not counted as device memory, and the copy brought back is an
// allocation of the step again, counted by the meter like any activation. Either way the
// engine's accountant counts the host copies as host-tier activations while they live.
//
// Use (train/activation_checkpoint.cpp): offload() in the checkpointed function's forward
// instead of saving the input; fetch() in its backward before recomputing the layer; forget the
// fetched tensor when the layer's backward is done. Entries link to the one offloaded before them,
// which fetch() starts bringing back: backward runs layers in the reverse of their forward order.
#pragma once

#include <torch/types.h>

#include <memory>

namespace ferry::offload {

class MemoryAccountant;

class ActivationOffloader {
 public:
  // One offloaded activation. Owned by the autograd context of the layer that saved it; its host
  // copy (and its count in the accountant) lives until it is destroyed.
  class Entry;

  // Counts host copies in `accountant`, which must outlive every entry.
  explicit ActivationOffloader(MemoryAccountant& accountant);
  ~ActivationOffloader();

  ActivationOffloader(const ActivationOffloader&) = delete;
  ActivationOffloader& operator=(const ActivationOffloader&) = delete;

  // Starts copying `activation` (on the device, contiguous or not) to host memory after the work
  // queued on the compute stream so far. The caller may drop `activation` right away.
  std::shared_ptr<Entry> offload(const torch::Tensor& activation);

  // The entry's activation on the device, ready for the compute stream, and the bringing back of
  // the entry offloaded before it started. The returned tensor is the caller's: the entry keeps
  // only its host copy, so dropping the tensor frees the device memory.
  torch::Tensor fetch(Entry& entry);

  // Host copies alive now and at most at once, in bytes (tests and benchmarks).
  uint64_t host_bytes() const;
  uint64_t host_peak_bytes() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace ferry::offload
