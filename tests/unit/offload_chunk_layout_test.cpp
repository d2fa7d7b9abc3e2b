// ChunkLayout: aligned offsets, whole tensors, one chunk per block or packing to a target size,
// and the Llama parameter list with Hugging Face names (GQA, tied embeddings, biases).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "offload/chunk_layout.h"
#include "tests/support/tiny_llama_config.h"
#include "src/model/family/model_tensors.h"

namespace ferry::offload {
namespace {

// Every tensor inside its chunk, aligned, not overlapping the next one in the same chunk.
void expect_well_formed(const ChunkLayout& layout) {
  const uint64_t alignment = layout.alignment();
  std::vector<bool> seen(layout.tensors().size(), false);
  for (size_t c = 0; c < layout.chunks().size(); ++c) {
    const Chunk& chunk = layout.chunks()[c];
    EXPECT_EQ(chunk.bytes % alignment, 0u) << "chunk " << c;
    uint64_t end = 0;
    for (size_t t : chunk.tensors) {
      const TensorPlacement& p = layout.placements()[t];
      EXPECT_EQ(p.chunk, static_cast<int64_t>(c));
      EXPECT_EQ(p.offset % alignment, 0u) << layout.tensors()[t].name;
      EXPECT_GE(p.offset, end) << layout.tensors()[t].name << " overlaps the tensor before it";
      EXPECT_EQ(p.bytes, layout.tensors()[t].bytes());
      end = p.offset + p.bytes;
      EXPECT_FALSE(seen[t]);
      seen[t] = true;
    }
    EXPECT_LE(end, chunk.bytes);
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool s) { return s; })) << "a tensor is in no chunk";
}

TEST(ChunkLayout, OffsetsAreAlignedByHand) {
  // 100 fp32 (400 B), 10 fp32 (40 B), 1000 bf16 (2000 B) in one block:
  // offsets 0, 512 (400 rounded up), 768 (552 rounded up); chunk 768 + 2000 = 2768 -> 2816.
  const ChunkLayout layout = ChunkLayout::build({{"a", 100, 4, 0}, {"b", 10, 4, 0}, {"c", 1000, 2, 0}});
  ASSERT_EQ(layout.chunks().size(), 1u);
  EXPECT_EQ(layout.placement("a").offset, 0u);
  EXPECT_EQ(layout.placement("b").offset, 512u);
  EXPECT_EQ(layout.placement("c").offset, 768u);
  EXPECT_EQ(layout.placement("c").bytes, 2000u);
  EXPECT_EQ(layout.chunks()[0].bytes, 2816u);
  EXPECT_EQ(layout.total_bytes(), 2816u);
  expect_well_formed(layout);
}

TEST(ChunkLayout, DefaultIsOneChunkPerGroup) {
  const ChunkLayout layout =
      ChunkLayout::build({{"e", 1000, 2, 0}, {"l0.a", 300, 2, 1}, {"l0.b", 300, 2, 1}, {"l1.a", 300, 2, 2}, {"h", 10, 2, 3}});
  ASSERT_EQ(layout.chunks().size(), 4u);
  EXPECT_EQ(layout.placement("l0.b").chunk, 1);
  EXPECT_EQ(layout.placement("l0.b").offset, 768u);  // 600 B rounded up
  EXPECT_EQ(layout.chunks()[1].bytes, 1536u);        // 768 + 600 = 1368 -> 1536
  EXPECT_EQ(layout.chunks()[1].first_group, 1);
  EXPECT_EQ(layout.chunks()[1].last_group, 1);
  EXPECT_EQ(layout.chunks_of_group(2), std::vector<int64_t>{2});
  EXPECT_EQ(layout.largest_chunk_bytes(), 2048u);  // 2000 B -> 2048
  expect_well_formed(layout);
}

TEST(ChunkLayout, TargetSizeMergesAndSplitsButNeverSplitsATensor) {
  // Target 4 KiB: small blocks are merged; the 10 KB tensor gets a chunk of its own.
  const ChunkLayout layout = ChunkLayout::build(
      {{"a", 500, 2, 0}, {"b", 500, 2, 1}, {"c", 500, 2, 2}, {"big", 5000, 2, 3}, {"d", 500, 2, 4}, {"e", 1500, 2, 4}},
      ChunkLayoutOptions{.chunk_size = 4096});
  // a at 0 (1000 B), b at 1024, c at 2048 (ends 3048); big (10000 B) does not fit -> own chunk;
  // d starts a new chunk (big's chunk is already over the target), e at 1024 ends 4024 <= 4096.
  ASSERT_EQ(layout.chunks().size(), 3u);
  EXPECT_EQ(layout.placement("c").chunk, 0);
  EXPECT_EQ(layout.placement("c").offset, 2048u);
  EXPECT_EQ(layout.chunks()[0].first_group, 0);
  EXPECT_EQ(layout.chunks()[0].last_group, 2);
  EXPECT_EQ(layout.placement("big").chunk, 1);
  EXPECT_EQ(layout.chunks()[1].bytes, 10240u);
  EXPECT_EQ(layout.placement("e").chunk, 2);
  EXPECT_EQ(layout.placement("e").offset, 1024u);
  EXPECT_EQ(layout.chunks()[2].bytes, 4096u);
  expect_well_formed(layout);
}

TEST(ChunkLayout, BadInputIsABug) {
  EXPECT_THROW(ChunkLayout::build({{"a", 1, 2, 0}, {"a", 1, 2, 0}}), InternalError);
  EXPECT_THROW(ChunkLayout::build({{"a", 1, 2, 1}, {"b", 1, 2, 0}}), InternalError);
  EXPECT_THROW(ChunkLayout::build({{"a", 1, 0, 0}}), InternalError);
  EXPECT_THROW(ChunkLayout::build({{"a", 1, 2, 0}}, ChunkLayoutOptions{.alignment = 100}), InternalError);
  const ChunkLayout layout = ChunkLayout::build({{"a", 1, 2, 0}});
  EXPECT_THROW(layout.placement("missing"), InternalError);
}

ModelShape small_gqa_tied() {
  ModelShape c =
      test_support::tiny_llama_config({.vocab_size = 100, .max_position_embeddings = 4096, .rms_norm_eps = 1e-6});
  c.tie_word_embeddings = true;
  return c;
}

TEST(ChunkLayout, LlamaNamesForGqaAndTiedEmbeddings) {
  const std::vector<TensorSpec> tensors = parameter_tensor_specs(small_gqa_tied(), 2);
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  const std::vector<std::string> layer0{
      "model.layers.0.input_layernorm.weight",          "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.k_proj.weight",         "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",         "model.layers.0.post_attention_layernorm.weight",
      "model.layers.0.mlp.gate_proj.weight",            "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.mlp.down_proj.weight"};
  ASSERT_EQ(names.size(), 1u + 2 * 9 + 1);  // embedding, two layers, final norm; no lm_head (tied)
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_EQ(std::vector<std::string>(names.begin() + 1, names.begin() + 10), layer0);
  EXPECT_EQ(names.back(), "model.norm.weight");
  EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 0);

  const ChunkLayout layout = ChunkLayout::build(tensors);
  // GQA: k/v have 2 heads x 16 = 32 outputs of 64 inputs; q and o are 64 x 64.
  EXPECT_EQ(layout.placement("model.layers.1.self_attn.k_proj.weight").bytes, 32u * 64 * 2);
  EXPECT_EQ(layout.placement("model.layers.1.self_attn.q_proj.weight").bytes, 64u * 64 * 2);
  EXPECT_EQ(layout.placement("model.layers.1.mlp.down_proj.weight").bytes, 64u * 128 * 2);
  // Parameters by hand: embedding 100*64 = 6400; per layer q 4096 + k 2048 + v 2048 + o 4096 +
  // MLP 3*64*128 = 24576 + two norms 128 = 36992; 6400 + 2*36992 + 64 (final norm) = 80448.
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel;
  EXPECT_EQ(total, 80448);
  EXPECT_EQ(total, parameter_count(small_gqa_tied()));
  // One chunk per block: embedding, two layers, final norm.
  ASSERT_EQ(layout.chunks().size(), 4u);
  EXPECT_EQ(layout.chunks_of_group(layer_group(1)), std::vector<int64_t>{2});
  EXPECT_EQ(layout.chunks_of_group(head_group(small_gqa_tied())), std::vector<int64_t>{3});
  expect_well_formed(layout);
}

TEST(ChunkLayout, LlamaBiasesAndUntiedHead) {
  ModelShape c = small_gqa_tied();
  c.tie_word_embeddings = false;
  c.attention_bias = true;  // Qwen2 style: q/k/v biases, no o bias
  const std::vector<TensorSpec> qwen = parameter_tensor_specs(c, 2);
  std::set<std::string> names;
  for (const auto& t : qwen) names.insert(t.name);
  EXPECT_TRUE(names.contains("lm_head.weight"));
  EXPECT_TRUE(names.contains("model.layers.1.self_attn.q_proj.bias"));
  EXPECT_TRUE(names.contains("model.layers.1.self_attn.k_proj.bias"));
  EXPECT_TRUE(names.contains("model.layers.1.self_attn.v_proj.bias"));
  EXPECT_FALSE(names.contains("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_FALSE(names.contains("model.layers.1.mlp.up_proj.bias"));
  EXPECT_EQ(qwen.back().name, "lm_head.weight");
  EXPECT_EQ(qwen.back().group, head_group(c));

  c.attention_output_bias = true;
  c.mlp_bias = true;
  names.clear();
  int64_t k_bias = 0;
  for (const auto& t : parameter_tensor_specs(c, 2)) {
    names.insert(t.name);
    if (t.name == "model.layers.0.self_attn.k_proj.bias") k_bias = t.numel;
  }
  EXPECT_TRUE(names.contains("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(names.contains("model.layers.0.mlp.gate_proj.bias"));
  EXPECT_TRUE(names.contains("model.layers.0.mlp.down_proj.bias"));
  EXPECT_EQ(k_bias, 32);
}

// Qwen3: q_norm / k_norm of head_dim after o_proj (where the model registers them), counted in
// num_parameters.
TEST(ChunkLayout, Qwen3QkNorms) {
  ModelShape c = small_gqa_tied();
  c.qk_norm = QkNorm::per_head;
  c.head_dim = 32;
  const std::vector<TensorSpec> tensors = parameter_tensor_specs(c, 2);
  std::vector<std::string> names;
  int64_t total = 0;
  for (const auto& t : tensors) {
    names.push_back(t.name);
    total += t.numel;
    if (t.name.ends_with("_norm.weight") && t.name.find("self_attn") != std::string::npos) {
      EXPECT_EQ(t.numel, 32) << t.name;
      EXPECT_EQ(t.group, layer_group(t.name.find("layers.1.") != std::string::npos ? 1 : 0)) << t.name;
    }
  }
  const auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  // The family tensor list's order (transformers' and llama.cpp's converter's): q/k norms after v_proj.
  ASSERT_LT(at("model.layers.1.self_attn.q_norm.weight"), static_cast<std::ptrdiff_t>(names.size()));
  EXPECT_EQ(at("model.layers.1.self_attn.q_norm.weight"), at("model.layers.1.self_attn.v_proj.weight") + 1);
  EXPECT_EQ(at("model.layers.1.self_attn.k_norm.weight"), at("model.layers.1.self_attn.v_proj.weight") + 2);
  EXPECT_EQ(names.size(), 1u + 2 * 11 + 1);
  EXPECT_EQ(total, parameter_count(c));
}

}  // namespace
}  // namespace ferry::offload
