// llama-quantize's per-tensor types (src/io/gguf_quant_mix.h) on tensor lists written by hand,
// with the choices worked out from llama-quant.cpp: use_more_bits over 8 and 32 layers, Q4_K_S's
// first-four attn_v and first-eighth ffn_down, output and tied token_embd at Q6_K (Q8_0 when the
// default block does not divide the rows), the fallbacks (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// F16), Phi-3's attn_qkv counted as attn_v, 70B's attn_v bump, 1-D / norm tensors kept F32, and
// LoRA adapters refused in these types.
// The same choices against llama.cpp itself: tests/parity/gguf_kquant_export_parity_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/io/ggml_quantize.h"
#include "src/io/gguf_adapter_export.h"
#include "src/io/gguf_quant_mix.h"

namespace ferry::io {
namespace {

// A llama-style decoder's tensors: `layers` blocks of hidden -> ffn, untied unless `tied`.
std::vector<GgufQuantTensor> decoder(int64_t layers, int64_t hidden, int64_t ffn, bool tied, bool fused_qkv = false) {
  std::vector<GgufQuantTensor> t{{"token_embd.weight", {1000, hidden}}, {"output_norm.weight", {hidden}}};
  if (!tied) t.push_back({"output.weight", {1000, hidden}});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    if (fused_qkv) {
      t.push_back({b + "attn_qkv.weight", {3 * hidden, hidden}});
    } else {
      for (const char* p : {"attn_q", "attn_k", "attn_v"}) t.push_back({b + p + ".weight", {hidden, hidden}});
      t.push_back({b + "attn_q.bias", {hidden}});
    }
    t.push_back({b + "attn_output.weight", {hidden, hidden}});
    t.push_back({b + "attn_norm.weight", {hidden}});
    t.push_back({b + "ffn_norm.weight", {hidden}});
    t.push_back({b + "ffn_gate.weight", {ffn, hidden}});
    t.push_back({b + "ffn_up.weight", {ffn, hidden}});
    t.push_back({b + "ffn_down.weight", {hidden, ffn}});
  }
  return t;
}

std::map<std::string, GgmlType> mix(GgufFileType type, const std::vector<GgufQuantTensor>& tensors,
                                    const GgufQuantModel& model) {
  const std::vector<GgmlType> types = gguf_quant_mix_types(type, model, tensors);
  std::map<std::string, GgmlType> out;
  for (size_t i = 0; i < tensors.size(); ++i) out[tensors[i].name] = types[i];
  return out;
}

std::string layer(int64_t i, const char* tensor) { return "blk." + std::to_string(i) + "." + tensor + ".weight"; }

TEST(GgufQuantMix, Q4KMUsesMoreBitsOnAttnVAndFfnDown) {
  const GgufQuantModel model{"llama", 32, 8, 8};
  const auto types = mix(GgufFileType::q4_k_m, decoder(32, 512, 1024, false), model);
  // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
  for (int64_t i = 0; i < 32; ++i) {
    const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
    EXPECT_EQ(types.at(layer(i, "attn_v")), more ? GgmlType::q6_k : GgmlType::q4_k) << i;
    EXPECT_EQ(types.at(layer(i, "ffn_down")), more ? GgmlType::q6_k : GgmlType::q4_k) << i;
    EXPECT_EQ(types.at(layer(i, "attn_q")), GgmlType::q4_k) << i;
    EXPECT_EQ(types.at(layer(i, "ffn_up")), GgmlType::q4_k) << i;
  }
  EXPECT_EQ(types.at("output.weight"), GgmlType::q6_k);
  EXPECT_EQ(types.at("token_embd.weight"), GgmlType::q4_k);  // untied: the default
  EXPECT_EQ(types.at("output_norm.weight"), GgmlType::f32);
  EXPECT_EQ(types.at("blk.0.attn_norm.weight"), GgmlType::f32);
  EXPECT_EQ(types.at("blk.0.attn_q.bias"), GgmlType::f32);
  // Eight layers: layers 0, 3, 6, 7.
  const auto eight = mix(GgufFileType::q5_k_m, decoder(8, 512, 1024, false), {"qwen2", 8, 8, 2});
  for (int64_t i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 3 || i == 6 || i == 7;
    EXPECT_EQ(eight.at(layer(i, "attn_v")), more ? GgmlType::q6_k : GgmlType::q5_k) << i;
  }
}

TEST(GgufQuantMix, Q4KSFirstLayers) {
  const auto types = mix(GgufFileType::q4_k_s, decoder(16, 512, 1024, false), {"llama", 16, 8, 8});
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(types.at(layer(i, "attn_v")), i < 4 ? GgmlType::q5_k : GgmlType::q4_k) << i;
    EXPECT_EQ(types.at(layer(i, "ffn_down")), i < 2 ? GgmlType::q5_k : GgmlType::q4_k) << i;
  }
}

TEST(GgufQuantMix, TiedEmbeddingsAndOutputTypes) {
  // Tied: token_embd is quantised as the output (Q6_K), for the K mixes and Q4_0 alike.
  EXPECT_EQ(mix(GgufFileType::q4_k_m, decoder(4, 512, 1024, true), {"qwen2", 4, 8, 2}).at("token_embd.weight"),
            GgmlType::q6_k);
  EXPECT_EQ(mix(GgufFileType::q4_0, decoder(4, 512, 1024, true), {"qwen2", 4, 8, 2}).at("token_embd.weight"),
            GgmlType::q6_k);
  const auto q4_0 = mix(GgufFileType::q4_0, decoder(4, 512, 1024, false), {"llama", 4, 8, 2});
  EXPECT_EQ(q4_0.at("token_embd.weight"), GgmlType::q4_0);
  EXPECT_EQ(q4_0.at("output.weight"), GgmlType::q6_k);
  EXPECT_EQ(q4_0.at(layer(0, "attn_v")), GgmlType::q4_0);
  EXPECT_EQ(q4_0.at(layer(0, "ffn_down")), GgmlType::q4_0);
  // Gemma 3 270M: 640-value rows. Q6_K does not fit, the K default's block does not either: Q8_0.
  EXPECT_EQ(mix(GgufFileType::q4_k_m, decoder(2, 640, 2048, true), {"gemma3", 2, 4, 1}).at("token_embd.weight"),
            GgmlType::q8_0);
  // Q4_0's block (32) divides 576 but Q6_K's does not: Q6_K, then its fallback Q8_0.
  EXPECT_EQ(mix(GgufFileType::q4_0, decoder(2, 576, 1536, false), {"llama", 2, 9, 3}).at("output.weight"),
            GgmlType::q8_0);
}

TEST(GgufQuantMix, FallbacksForRowsNotAMultipleOfTheBlock) {
  // hidden 576 (SmolLM2-135M): most K tensors fall back; ffn 80 fits no 32-value block: F16.
  const auto k4 = mix(GgufFileType::q4_k_m, decoder(8, 576, 1536, true), {"llama", 8, 9, 3});
  EXPECT_EQ(k4.at(layer(1, "attn_q")), GgmlType::q5_0);    // Q4_K -> Q5_0
  EXPECT_EQ(k4.at(layer(0, "attn_v")), GgmlType::q8_0);    // Q6_K -> Q8_0
  EXPECT_EQ(k4.at(layer(1, "ffn_down")), GgmlType::q4_k);  // 1536 values a row: fits
  EXPECT_EQ(k4.at(layer(0, "ffn_down")), GgmlType::q6_k);
  EXPECT_EQ(mix(GgufFileType::q5_k_m, decoder(8, 576, 1536, true), {"llama", 8, 9, 3}).at(layer(1, "attn_q")),
            GgmlType::q5_1);  // Q5_K -> Q5_1
  const auto odd = mix(GgufFileType::q4_k_m, decoder(2, 256, 80, false), {"llama", 2, 4, 4});
  EXPECT_EQ(odd.at(layer(1, "ffn_down")), GgmlType::f16);
  EXPECT_EQ(odd.at(layer(1, "ffn_up")), GgmlType::q4_k);
  EXPECT_EQ(mix(GgufFileType::q5_0, decoder(2, 256, 80, false), {"llama", 2, 4, 4}).at(layer(1, "ffn_down")),
            GgmlType::f16);
}

TEST(GgufQuantMix, FusedQkvCountsAsAttnVAndSeventyBBumpsAttnV) {
  const auto phi3 = mix(GgufFileType::q4_k_m, decoder(4, 512, 1024, false, true), {"phi3", 4, 8, 8});
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(phi3.at(layer(i, "attn_qkv")), i >= 2 ? GgmlType::q6_k : GgmlType::q4_k) << i;
  }
  const auto llama70 = mix(GgufFileType::q4_k_m, decoder(80, 256, 512, false), {"llama", 80, 64, 8});
  EXPECT_EQ(llama70.at(layer(20, "attn_v")), GgmlType::q5_k);  // not use_more_bits: Q4_K -> Q5_K
  EXPECT_EQ(llama70.at(layer(12, "attn_v")), GgmlType::q6_k);  // (12 - 10) % 3 == 2
  EXPECT_EQ(llama70.at(layer(20, "ffn_down")), GgmlType::q4_k);
  // 80 layers without grouped KV heads (LLaMA 1 65B): no bump.
  EXPECT_EQ(mix(GgufFileType::q4_k_m, decoder(80, 256, 512, false), {"llama", 80, 64, 64}).at(layer(20, "attn_v")),
            GgmlType::q4_k);
}

TEST(GgufQuantMix, ConverterTypesAreNotMixes) {
  EXPECT_THROW(gguf_quant_mix_types(GgufFileType::q8_0, {"llama", 1, 1, 1}, {}), InternalError);
  EXPECT_THROW(gguf_tensor_type(GgufFileType::q4_k_m, {256, 256}), InternalError);
  EXPECT_TRUE(is_llama_quantize_type(GgufFileType::q5_0));
  EXPECT_FALSE(is_llama_quantize_type(GgufFileType::bf16));
  EXPECT_EQ(gguf_file_type_name(parse_gguf_file_type("q5_k_m")), "q5_k_m");
  // A LoRA adapter is not a model llama-quantize mixes: refused before the checkpoint is read.
  GgufAdapterExportOptions adapter;
  adapter.checkpoint = "no-such-checkpoint";
  adapter.type = GgufFileType::q4_k_m;
  EXPECT_THROW(export_gguf_adapter(adapter), UserError);
}

}  // namespace
}  // namespace ferry::io
