// ChunkLayout: how a model's parameters are packed into chunks — contiguous buffers, tens of MB,
// each holding whole tensors at aligned offsets — so that paging a block in or out is one large
// copy (one DMA) instead of one small copy per tensor. The runtime engine allocates one buffer per
// chunk in each tier and makes every parameter a view at its offset; the planner sizes the
// device working set from the chunk sizes. Torch-free: tensors are described by name, element
// count and element size.
//
// Tensors come in execution order with a group index (the block that uses them: the embedding,
// each decoder layer, the final norm + LM head). By default each group is one chunk. With a
// target chunk size, consecutive tensors are packed greedily up to that size, across group
// boundaries, and a tensor larger than the target gets a chunk of its own: a tensor is never split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/config/model_shape.h"
#include "src/model/family/model_tensors.h"

namespace ferry::offload {

struct TensorSpec {
  std::string name;
  int64_t numel = 0;
  int64_t element_size = 2;  // bytes per element
  int64_t group = 0;         // the block that uses the tensor; non-decreasing in execution order
  // Model weights the tensor stores: numel (-1), or for a quantised weight's parts (QLoRA's NF4
  // base, memory_model.h) two per packed byte and none for the scales.
  int64_t weights = -1;

  uint64_t bytes() const { return static_cast<uint64_t>(numel) * static_cast<uint64_t>(element_size); }
  int64_t weight_count() const { return weights < 0 ? numel : weights; }
};

struct ChunkLayoutOptions {
  uint64_t chunk_size = 0;  // target bytes per chunk; 0: one chunk per group
  uint64_t alignment = 256;  // every tensor offset and every chunk size is a multiple of this
};

// Where one tensor lives.
struct TensorPlacement {
  int64_t chunk = 0;
  uint64_t offset = 0;  // bytes from the chunk's start; a multiple of the alignment
  uint64_t bytes = 0;
};

struct Chunk {
  uint64_t bytes = 0;               // tensors + alignment padding, a multiple of the alignment
  int64_t first_group = 0;          // groups whose tensors it holds (inclusive range)
  int64_t last_group = 0;
  std::vector<size_t> tensors;      // indices into ChunkLayout::tensors(), in order
};

class ChunkLayout {
 public:
  // Throws InternalError for an empty name, a duplicate name, a non-positive element size,
  // negative numel, groups out of order, or an alignment that is not a power of two.
  static ChunkLayout build(std::vector<TensorSpec> tensors, ChunkLayoutOptions options = {});

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const std::vector<TensorPlacement>& placements() const { return placements_; }  // parallel to tensors()
  // Throws InternalError for a name that is not in the layout.
  const TensorPlacement& placement(std::string_view name) const;
  bool contains(std::string_view name) const;

  // Chunks holding any tensor of `group`, in order.
  std::vector<int64_t> chunks_of_group(int64_t group) const;
  // Sum of chunk sizes (tensors + padding).
  uint64_t total_bytes() const;
  uint64_t largest_chunk_bytes() const;
  uint64_t alignment() const { return options_.alignment; }

 private:
  std::vector<TensorSpec> tensors_;
  std::vector<TensorPlacement> placements_;
  std::vector<Chunk> chunks_;
  std::unordered_map<std::string, size_t> index_by_name_;
  ChunkLayoutOptions options_;
};

// Every parameter of a causal LM in execution order, as its family's tensor list gives them
// (src/model/family/model_tensors.h: Hugging Face names, groups embedding_group(), layer_group(i),
// head_group()), each of `element_size` bytes per element.
std::vector<TensorSpec> parameter_tensor_specs(const ModelShape& config, int64_t element_size);

}  // namespace ferry::offload
