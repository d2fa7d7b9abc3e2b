// ChunkLayout: packing tensors into aligned chunks, and the Llama parameter list.
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

std::vector<TensorSpec> llama_parameter_tensors(const LlamaConfig& config, int64_t element_size) {
  const int64_t h = config.hidden_size;
  const int64_t q_out = config.num_attention_heads * config.head_dim;
  const int64_t kv_out = config.num_key_value_heads * config.head_dim;
  const int64_t inter = config.intermediate_size;
  std::vector<TensorSpec> tensors;
  auto add = [&](std::string name, int64_t numel, int64_t group) {
    tensors.push_back(TensorSpec{std::move(name), numel, element_size, group});
  };

  add("model.embed_tokens.weight", config.vocab_size * h, llama_embedding_group());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const int64_t g = llama_layer_group(i);
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    add(layer + "input_layernorm.weight", h, g);
    add(layer + "self_attn.q_proj.weight", q_out * h, g);
    if (config.attention_bias) add(layer + "self_attn.q_proj.bias", q_out, g);
    add(layer + "self_attn.k_proj.weight", kv_out * h, g);
    if (config.attention_bias) add(layer + "self_attn.k_proj.bias", kv_out, g);
    add(layer + "self_attn.v_proj.weight", kv_out * h, g);
    if (config.attention_bias) add(layer + "self_attn.v_proj.bias", kv_out, g);
    add(layer + "self_attn.o_proj.weight", h * q_out, g);
    if (config.attention_output_bias) add(layer + "self_attn.o_proj.bias", h, g);
    if (config.qk_norm) add(layer + "self_attn.q_norm.weight", config.head_dim, g);
    if (config.qk_norm) add(layer + "self_attn.k_norm.weight", config.head_dim, g);
    add(layer + "post_attention_layernorm.weight", h, g);
    add(layer + "mlp.gate_proj.weight", inter * h, g);
    if (config.mlp_bias) add(layer + "mlp.gate_proj.bias", inter, g);
    add(layer + "mlp.up_proj.weight", inter * h, g);
    if (config.mlp_bias) add(layer + "mlp.up_proj.bias", inter, g);
    add(layer + "mlp.down_proj.weight", h * inter, g);
    if (config.mlp_bias) add(layer + "mlp.down_proj.bias", h, g);
  }
  add("model.norm.weight", h, llama_head_group(config));
  if (!config.tie_word_embeddings) add("lm_head.weight", config.vocab_size * h, llama_head_group(config));
  return tensors;
}

}  // namespace ferry::offload
