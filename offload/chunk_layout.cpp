// ChunkLayout: packing tensors into aligned chunks, and a model's parameter list as chunk specs.
#include "offload/chunk_layout.h"

#include <algorithm>

#include "core/error.h"

namespace ferry::offload {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

}  // namespace

ChunkLayout ChunkLayout::build(std::vector<TensorSpec> tensors, ChunkLayoutOptions options) {
  FERRY_CHECK(options.alignment > 0 && (options.alignment & (options.alignment - 1)) == 0,
              "chunk alignment must be a power of two, got ", options.alignment);
  ChunkLayout layout;
  layout.options_ = options;
  layout.tensors_ = std::move(tensors);
  layout.placements_.resize(layout.tensors_.size());

  Chunk current;
  uint64_t fill = 0;  // end of the last tensor in `current`, unaligned
  bool open = false;
  int64_t previous_group = 0;
  auto close_chunk = [&] {
    if (!open) return;
    current.bytes = align_up(fill, options.alignment);
    layout.chunks_.push_back(std::move(current));
    current = Chunk{};
    fill = 0;
    open = false;
  };

  for (size_t i = 0; i < layout.tensors_.size(); ++i) {
    const TensorSpec& t = layout.tensors_[i];
    FERRY_CHECK(!t.name.empty(), "tensor ", i, " has no name");
    FERRY_CHECK(t.numel >= 0 && t.element_size > 0, "tensor ", t.name, " has numel ", t.numel,
                " and element size ", t.element_size);
    FERRY_CHECK(i == 0 || t.group >= previous_group, "tensor ", t.name, " (group ", t.group,
                ") comes after group ", previous_group, ": tensors must be in execution order");
    FERRY_CHECK(layout.index_by_name_.emplace(t.name, i).second, "tensor ", t.name, " is listed twice");

    const uint64_t offset = align_up(fill, options.alignment);
    bool start_new = !open;
    if (open) {
      if (options.chunk_size == 0) {
        start_new = t.group != current.last_group;
      } else {
        start_new = offset + t.bytes() > options.chunk_size;  // a tensor is never split
      }
    }
    if (start_new) {
      close_chunk();
      current.first_group = t.group;
      open = true;
    }
    const uint64_t at = start_new ? 0 : offset;
    current.last_group = t.group;
    current.tensors.push_back(i);
    layout.placements_[i] = TensorPlacement{static_cast<int64_t>(layout.chunks_.size()), at, t.bytes()};
    fill = at + t.bytes();
    previous_group = t.group;
  }
  close_chunk();
  return layout;
}

const TensorPlacement& ChunkLayout::placement(std::string_view name) const {
  const auto it = index_by_name_.find(std::string(name));
  FERRY_CHECK(it != index_by_name_.end(), "no tensor named ", name, " in the chunk layout");
  return placements_[it->second];
}

bool ChunkLayout::contains(std::string_view name) const { return index_by_name_.contains(std::string(name)); }

std::vector<int64_t> ChunkLayout::chunks_of_group(int64_t group) const {
  std::vector<int64_t> result;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const bool holds = std::any_of(chunks_[c].tensors.begin(), chunks_[c].tensors.end(),
                                   [&](size_t t) { return tensors_[t].group == group; });
    if (holds) result.push_back(static_cast<int64_t>(c));
  }
  return result;
}

uint64_t ChunkLayout::total_bytes() const {
  uint64_t sum = 0;
  for (const Chunk& c : chunks_) sum += c.bytes;
  return sum;
}

uint64_t ChunkLayout::largest_chunk_bytes() const {
  uint64_t largest = 0;
  for (const Chunk& c : chunks_) largest = std::max(largest, c.bytes);
  return largest;
}

std::vector<TensorSpec> parameter_tensor_specs(const ModelShape& config, int64_t element_size) {
  std::vector<TensorSpec> tensors;
  for (const ModelTensor& t : model_tensors(config)) {
    tensors.push_back(TensorSpec{t.name, t.numel(), element_size, t.group});
  }
  return tensors;
}

}  // namespace ferry::offload
