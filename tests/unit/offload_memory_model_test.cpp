// MemoryModel: bytes per tier and category under each policy, checked against the arithmetic
// written out by hand for a small Llama (hidden 64, 2 layers, 4 heads of 16, MLP 128, vocab 100).
#include <gtest/gtest.h>

#include "core/error.h"
#include "offload/memory_model.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry::offload {
namespace {

using C = MemoryCategory;
constexpr MemoryTier D = MemoryTier::device;
constexpr MemoryTier H = MemoryTier::host;

// P = embedding 100*64 = 6400 + LM head 6400 + 2 layers * (4*64*64 + 3*64*128 + 2*64 = 41088)
//     + final norm 64 = 95040.
constexpr uint64_t P = 95040;
// Host gradients under the offloading policies: fp32 sums (4 B/param, with or without
// accumulation) and the engine's ring of 4 staging slots, each the largest trainable tensor (an
// MLP projection, 64 * 128 bf16 weights).
constexpr uint64_t kStagingRing = 4 * 64 * 128 * 2;
constexpr uint64_t kOverhead = 1000;
constexpr int64_t kMicroBatch = 2;
constexpr int64_t kSeq = 8;  // 16 tokens per micro-batch

ModelShape small_model() {
  return test_support::tiny_llama_config(
      {.vocab_size = 100, .num_key_value_heads = 4, .max_position_embeddings = 4096, .rms_norm_eps = 1e-6});
}

MemoryModel model_for(Precision precision, int64_t lora_rank = 0) {
  TrainingShape shape;
  shape.model = small_model();
  shape.precision = precision;
  shape.seq_len = kSeq;
  shape.lora_rank = lora_rank;
  shape.lora_targets = {"q_proj", "v_proj"};
  MemoryModelConstants constants;
  constants.device_overhead_bytes = kOverhead;
  return MemoryModel(shape, constants);
}

PlacementChoice choice(OffloadPolicy policy, bool checkpoint = false) {
  PlacementChoice c;
  c.policy = policy;
  c.micro_batch_size = kMicroBatch;
  c.layer_checkpointed.assign(2, checkpoint);
  return c;
}

// Activations per token, fp32 (4 bytes): a layer saves 2*64 (input norm in/out) + 64+2*64 (q, k,
// v) + 64 (attention out) + 2*64 (post norm in/out) + 4*128 (gate, up, silu, product) = 1024
// elements = 4096 B, + 4 heads * 4 B logsumexp = 4112. Head: 2*64*4 (final norm) + 100*3*4
// (three fp32 logit-sized tensors: the log-softmax and two gradients) = 1712. Backward workspace
// (2*64 + 2*128)*4 = 1536.
constexpr uint64_t kFp32ActivationsPerToken = 2 * 4112 + 1712 + 1536;  // 11472
// Checkpointed: two saved inputs 2*64*4, one recomputed layer (4112 > 1712), workspace.
constexpr uint64_t kFp32CheckpointedPerToken = 2 * 256 + 4112 + 1536;  // 6160
// bf16: layer 1024*2 + 16 = 2064; head 2*64*2 + 100*(2+3*4) = 1656; workspace 384*2 = 768.
constexpr uint64_t kBf16ActivationsPerToken = 2 * 2064 + 1656 + 768;  // 6552

TEST(MemoryModel, ParameterCountByHand) {
  const MemoryModel m = model_for(Precision::fp32);
  EXPECT_EQ(m.base_parameters(), static_cast<int64_t>(P));
  EXPECT_EQ(m.trainable_parameters(), static_cast<int64_t>(P));
}

TEST(MemoryModel, NoneFp32Is16BytesPerParamPlusActivations) {
  const MemoryEstimate e = model_for(Precision::fp32).estimate(choice(OffloadPolicy::none));
  EXPECT_EQ(e.bytes.at(D, C::weights), 4 * P);
  EXPECT_EQ(e.bytes.at(D, C::grads), 4 * P);
  EXPECT_EQ(e.bytes.at(D, C::master), 0u);  // fp32 weights are the master copy
  EXPECT_EQ(e.bytes.at(D, C::moments), 8 * P);
  EXPECT_EQ(e.bytes.at(D, C::activations), kFp32ActivationsPerToken * kMicroBatch * kSeq);
  EXPECT_EQ(e.bytes.at(D, C::activations), 183552u);
  EXPECT_EQ(e.device_total(), 16 * P + 183552 + kOverhead);
  EXPECT_EQ(e.host_total(), 0u);
}

TEST(MemoryModel, NoneBf16IsMixedPrecisionAdam) {
  const MemoryEstimate e = model_for(Precision::bf16).estimate(choice(OffloadPolicy::none));
  // bf16 weight 2 + bf16 grad 2 + fp32 master 4 + m 4 + v 4 = 16 bytes per parameter.
  EXPECT_EQ(e.bytes.at(D, C::weights), 2 * P);
  EXPECT_EQ(e.bytes.at(D, C::grads), 2 * P);
  EXPECT_EQ(e.bytes.at(D, C::master), 4 * P);
  EXPECT_EQ(e.bytes.at(D, C::moments), 8 * P);
  EXPECT_EQ(e.bytes.at(D, C::activations), kBf16ActivationsPerToken * 16);
  EXPECT_EQ(e.device_total(), 16 * P + 104832 + kOverhead);
}

TEST(MemoryModel, OptimizerKeepsAtMostFourBytesPerParamOnTheDevice) {
  const MemoryEstimate e = model_for(Precision::bf16).estimate(choice(OffloadPolicy::optimizer));
  // bf16 weights (2 B/param) stay; gradients stream out through two staging buffers of the
  // largest chunk's gradients (a layer: 41088 params * 2 B), so the device holds <= 4 B/param.
  EXPECT_EQ(e.bytes.at(D, C::weights), 2 * P);
  EXPECT_EQ(e.bytes.at(D, C::grads), 2u * 41088 * 2);
  EXPECT_LE(e.bytes.at(D, C::weights) + e.bytes.at(D, C::grads), 4 * P);
  EXPECT_EQ(e.bytes.at(D, C::master) + e.bytes.at(D, C::moments), 0u);
  EXPECT_EQ(e.device_total(), 2 * P + 164352 + 104832 + kOverhead);
  EXPECT_EQ(e.bytes.at(H, C::master), 4 * P);
  EXPECT_EQ(e.bytes.at(H, C::moments), 8 * P);
  EXPECT_EQ(e.bytes.at(H, C::grads), 4 * P + kStagingRing);
  EXPECT_EQ(e.bytes.at(H, C::weights), 2 * P);
}

// ZeRO: one of N data-parallel processes holds 1/N of the master weights and moments (stage >= 1)
// and, at stage 3 under the offloading policies, of the weights' host copies; nothing else.
TEST(MemoryModel, ZeroStagesDivideOneProcesssStateByTheProcessCount) {
  const auto estimate = [](OffloadPolicy policy, int64_t processes, int64_t stage) {
    TrainingShape shape;
    shape.model = small_model();
    shape.precision = Precision::bf16;
    shape.seq_len = kSeq;
    shape.processes = processes;
    shape.zero_stage = stage;
    MemoryModelConstants constants;
    constants.device_overhead_bytes = kOverhead;
    return MemoryModel(shape, constants).estimate(choice(policy, true)).bytes;
  };
  for (OffloadPolicy policy : {OffloadPolicy::none, OffloadPolicy::optimizer, OffloadPolicy::params}) {
    const auto one = estimate(policy, 1, 0);
    const MemoryTier state = policy == OffloadPolicy::none ? D : H;
    EXPECT_EQ(estimate(policy, 4, 0).at(state, C::moments), one.at(state, C::moments));  // stage 0: all of it
    for (int64_t stage : {1, 2, 3}) {
      if (policy == OffloadPolicy::none && stage == 3) continue;  // needs the chunked engine
      const auto four = estimate(policy, 4, stage);
      EXPECT_EQ(four.at(state, C::moments), 8 * P / 4) << enum_name(policy) << " stage " << stage;
      EXPECT_EQ(four.at(state, C::master), 4 * P / 4) << enum_name(policy) << " stage " << stage;
      EXPECT_EQ(four.at(D, C::weights), one.at(D, C::weights));
      EXPECT_EQ(four.at(H, C::grads), one.at(H, C::grads));
      EXPECT_EQ(four.at(H, C::weights), stage == 3 ? (one.at(H, C::weights) + 3) / 4 : one.at(H, C::weights))
          << enum_name(policy) << " stage " << stage;
    }
  }
}

TEST(MemoryModel, ParamsKeepsTwoChunksInFlight) {
  const MemoryModel m = model_for(Precision::bf16);
  // bf16 chunks (256-byte aligned): embedding 12800; a layer: norm 128 -> 256, q/k/v/o 8192 each,
  // norm 128 -> 256 (at 33024, so gate starts at 33280), gate/up/down 16384 each -> 82432;
  // head: norm 256 + lm_head 12800 = 13056.
  ASSERT_EQ(m.layout().chunks().size(), 4u);
  EXPECT_EQ(m.layout().chunks()[0].bytes, 12800u);
  EXPECT_EQ(m.layout().chunks()[1].bytes, 82432u);
  EXPECT_EQ(m.layout().chunks()[3].bytes, 13056u);
  const MemoryEstimate e = m.estimate(choice(OffloadPolicy::params));
  // In flight: the chunk in use + 1 prefetched, at worst two layers: 2 * 82432.
  EXPECT_EQ(e.bytes.at(D, C::weights), 2u * 82432);
  // Two gradient staging buffers of the largest chunk's 41088 bf16 gradients.
  EXPECT_EQ(e.bytes.at(D, C::grads), 2u * 41088 * 2);
  EXPECT_LE(e.device_total(), 4u * 82432 + 104832 + kOverhead);  // two blocks' chunks (weights + grads)
  EXPECT_EQ(e.bytes.at(D, C::activations), 104832u);
  EXPECT_EQ(e.bytes.at(H, C::weights), 12800u + 2 * 82432 + 13056);
  EXPECT_EQ(e.bytes.at(H, C::master), 4 * P);
  EXPECT_EQ(e.bytes.at(H, C::moments), 8 * P);
  EXPECT_EQ(e.bytes.at(H, C::grads), 4 * P + kStagingRing);

  // Keeping the embedding on the device adds it and leaves the worst window at two layers.
  PlacementChoice keep = choice(OffloadPolicy::params);
  keep.chunk_on_device = {true, false, false, false};
  EXPECT_EQ(m.estimate(keep).bytes.at(D, C::weights), 12800u + 2 * 82432);
  // Keeping everything: all chunks, nothing in flight.
  keep.chunk_on_device = {true, true, true, true};
  EXPECT_EQ(m.estimate(keep).bytes.at(D, C::weights), 12800u + 2 * 82432 + 13056);
}

TEST(MemoryModel, ParamsAccumulatesHostGradientsInFp32) {
  TrainingShape shape = model_for(Precision::bf16).shape();
  shape.grad_accumulation = 4;
  const MemoryModel m(shape, MemoryModelConstants{.device_overhead_bytes = kOverhead});
  EXPECT_EQ(m.estimate(choice(OffloadPolicy::params)).bytes.at(H, C::grads), 4 * P + kStagingRing);
  EXPECT_EQ(m.estimate(choice(OffloadPolicy::optimizer)).bytes.at(H, C::grads), 4 * P + kStagingRing);
}

TEST(MemoryModel, CheckpointingKeepsLayerInputsAndOneRecomputedLayer) {
  const MemoryModel m = model_for(Precision::fp32);
  EXPECT_EQ(m.estimate(choice(OffloadPolicy::none, true)).bytes.at(D, C::activations),
            kFp32CheckpointedPerToken * 16);
  EXPECT_EQ(m.estimate(choice(OffloadPolicy::none, true)).bytes.at(D, C::activations), 98560u);
  // One of two layers checkpointed: 4112 + 256 saved, plus the recomputed layer, plus workspace.
  PlacementChoice half = choice(OffloadPolicy::none);
  half.layer_checkpointed = {true, false};
  EXPECT_EQ(m.estimate(half).bytes.at(D, C::activations), (4112u + 256 + 4112 + 1536) * 16);
}

TEST(MemoryModel, OffloadedCheckpointsLeaveTwoInputsOnTheDeviceAndTheRestOnTheHost) {
  // Six layers, all checkpointed: 6 inputs of 256 B per token kept, or 2 with the rest offloaded.
  TrainingShape shape = model_for(Precision::fp32).shape();
  shape.model.num_hidden_layers = 6;
  const MemoryModel m(shape, MemoryModelConstants{.device_overhead_bytes = kOverhead});
  PlacementChoice kept = choice(OffloadPolicy::none);
  kept.layer_checkpointed.assign(6, true);
  PlacementChoice offloaded = kept;
  offloaded.activation_offload = true;
  EXPECT_EQ(m.estimate(kept).bytes.at(D, C::activations), (6 * 256u + 4112 + 1536) * 16);
  EXPECT_EQ(m.estimate(offloaded).bytes.at(D, C::activations), (2 * 256u + 4112 + 1536) * 16);
  EXPECT_EQ(m.estimate(offloaded).bytes.at(H, C::activations), 6 * 256u * 16);
  EXPECT_EQ(m.estimate(kept).bytes.at(H, C::activations), 0u);
  // Only checkpointed layers have inputs to offload: one of six here, so nothing leaves the device.
  offloaded.layer_checkpointed = {true, false, false, false, false, false};
  EXPECT_EQ(m.estimate(offloaded).bytes.at(H, C::activations), 256u * 16);
  EXPECT_EQ(m.estimate(offloaded).bytes.at(D, C::activations), (5 * 4112u + 256 + 4112 + 1536) * 16);
}

TEST(MemoryModel, ChunkedHeadHoldsOneChunksLogits) {
  TrainingShape shape = model_for(Precision::fp32).shape();
  shape.logits_chunk = 4;  // 4 of the 16 tokens' logits at a time
  const MemoryModel m(shape, MemoryModelConstants{.device_overhead_bytes = kOverhead});
  EXPECT_EQ(m.logits_rows(16), 4);
  // Layers and workspace as before; the final norm for all 16 tokens, the logits for 4 rows.
  EXPECT_EQ(m.estimate(choice(OffloadPolicy::none)).bytes.at(D, C::activations),
            (2 * 4112u + 1536) * 16 + 2 * 64 * 4 * 16 + 100 * 12 * 4);
  shape.logits_chunk = 0;  // all at once
  EXPECT_EQ(MemoryModel(shape).estimate(choice(OffloadPolicy::none)).bytes.at(D, C::activations), 183552u);
  shape.logits_chunk = -1;  // auto: at least 256 rows, so all 16 here
  EXPECT_EQ(MemoryModel(shape).logits_rows(16), 16);
  EXPECT_EQ(MemoryModel(shape).logits_rows(4096), 2048);  // ceil(100 / 64) = 2 chunks
}

TEST(MemoryModel, LoraTrainsOnlyAdapters) {
  // Rank 4 on q_proj (64 -> 64) and v_proj (64 -> 64): 4*(64+64) * 2 = 1024 per layer, 2048 total.
  const MemoryModel m = model_for(Precision::bf16, 4);
  EXPECT_EQ(m.lora_parameters_per_layer(), 1024);
  EXPECT_EQ(m.trainable_parameters(), 2048);
  const MemoryEstimate e = m.estimate(choice(OffloadPolicy::optimizer));
  EXPECT_EQ(e.bytes.at(D, C::weights), (P + 2048) * 2);
  EXPECT_EQ(e.bytes.at(D, C::grads), 2048u * 2);
  EXPECT_EQ(e.bytes.at(H, C::master), 2048u * 4);
  EXPECT_EQ(e.bytes.at(H, C::moments), 2048u * 8);
  // Each adapter adds its rank-wide middle (4 bf16 values) per token per layer.
  EXPECT_EQ(e.bytes.at(D, C::activations), (kBf16ActivationsPerToken + 2 * 2 * 4 * 2) * 16);
  EXPECT_THROW(lora_parameters_per_layer(small_model(), 4, {"qkv_proj"}), ConfigError);

  // LoRA dropout copies each adapter's input (64 wide for q_proj and v_proj) and keeps a 1-byte
  // mask: (64 + 64) * (2 + 1) bytes per token per layer more.
  TrainingShape dropped = m.shape();
  dropped.lora_dropout = 0.05;
  const MemoryModel d(dropped, m.constants());
  EXPECT_EQ(d.estimate(choice(OffloadPolicy::optimizer)).bytes.at(D, C::activations),
            e.bytes.at(D, C::activations) + 2u * 128 * 3 * 16);
}

TEST(MemoryModel, Nf4BaseCountsPackedCodesScalesAndOneDequantisationBuffer) {
  // QLoRA: each decoder projection in NF4, by hand. Attention projections 64x64 = 4096 weights:
  // 2048 packed bytes, 64 blocks of 64 -> 64 uint8 scales, ceil(64/256) = 1 fp32 nested scale (4 B)
  // = 2116 B. MLP projections 64x128 = 8192: 4096 + 128 + 4 = 4228 B. Per layer 4*2116 + 3*4228 =
  // 21148; two layers 42296. Everything else stays bf16: embedding, head, 2*2 layer norms and the
  // final norm = 6400 + 6400 + 256 + 64 = 13120 weights = 26240 B.
  TrainingShape shape;
  shape.model = small_model();
  shape.precision = Precision::bf16;
  shape.seq_len = kSeq;
  shape.lora_rank = 4;
  shape.lora_targets = {"q_proj", "v_proj"};
  shape.base = BaseFormat::nf4_double_quant;
  MemoryModelConstants constants;
  constants.device_overhead_bytes = kOverhead;
  const MemoryModel m(shape, constants);
  EXPECT_EQ(m.base_parameters(), static_cast<int64_t>(P)) << "NF4 stores the same weights";
  EXPECT_EQ(m.quantized_parameters(), 2 * 40960);
  EXPECT_EQ(m.quantized_bytes(), 42296u);
  EXPECT_EQ(m.base_weight_bytes(), 42296u + 26240u);
  EXPECT_EQ(m.dequantize_buffer_bytes(), 8192u * 2) << "the largest projection, in bf16";
  const MemoryEstimate none = m.estimate(choice(OffloadPolicy::none));
  EXPECT_EQ(none.bytes.at(D, C::weights), 42296u + 26240u + 2048u * 2);  // + the adapters in bf16
  EXPECT_EQ(none.bytes.at(D, C::buffers), kOverhead + 8192u * 2);
  EXPECT_EQ(none.bytes.at(D, C::moments), 2048u * 8) << "only the adapters train";
  // Under `params` the host holds every chunk: the NF4 parts with their 256-byte alignment.
  const MemoryEstimate paged = m.estimate(choice(OffloadPolicy::params, true));
  EXPECT_EQ(paged.bytes.at(H, C::weights), m.layout().total_bytes() + 2048u * 2);
  EXPECT_LT(m.layout().total_bytes(), 42296u + 26240u + 256u * 40);
  EXPECT_GT(m.layout().total_bytes(), 42296u + 26240u);

  // Without double quantisation the scales are fp32: 2048 + 256 and 4096 + 512 bytes.
  shape.base = BaseFormat::nf4;
  const MemoryModel plain(shape, constants);
  EXPECT_EQ(plain.quantized_bytes(), 2u * (4 * 2304 + 3 * 4608));
  // int8: a byte per weight plus an fp32 scale per output row: q, k, v, o 4096 + 64*4; gate, up
  // 8192 + 128*4; down 8192 + 64*4 = 43264 per layer.
  shape.base = BaseFormat::int8;
  const MemoryModel int8(shape, constants);
  EXPECT_EQ(int8.quantized_parameters(), 2 * 40960);
  EXPECT_EQ(int8.quantized_bytes(), 2u * 43264);
  EXPECT_EQ(int8.dequantize_buffer_bytes(), 8192u * 2);
  EXPECT_TRUE(int8.layout().contains("model.layers.1.mlp.down_proj.SCB"));
  EXPECT_EQ(base_format(BaseQuantization::nf4, true), BaseFormat::nf4_double_quant);
  EXPECT_EQ(base_format(BaseQuantization::int8, true), BaseFormat::int8);
  EXPECT_THROW(  // NF4 is a frozen base under adapters
      {
        TrainingShape full = shape;
        full.lora_rank = 0;
        MemoryModel bad(full, constants);
      },
      InternalError);
}

TEST(MemoryModel, GgufBaseCountsEachProjectionAsItsFileStoresIt) {
  // lora.quantize_base gguf: the bytes the file gives per projection, by hand. Layer 0 in Q4_1 (20
  // bytes per 32 weights: 4096 -> 2560, 8192 -> 5120), layer 1 in Q8_0 (34 per 32: 4352, 8704) but
  // its o_proj stored F16 in the file, which stays a bf16 float weight like the embeddings.
  TrainingShape shape;
  shape.model = small_model();
  shape.precision = Precision::bf16;
  shape.seq_len = kSeq;
  shape.lora_rank = 4;
  shape.lora_targets = {"q_proj", "v_proj"};
  shape.base = BaseFormat::gguf;
  uint64_t stored = 0;
  for (int layer = 0; layer < 2; ++layer) {
    for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
      const std::string name = "model.layers." + std::to_string(layer) + "." + p + ".weight";
      if (layer == 1 && std::string(p) == "self_attn.o_proj") continue;  // F16 in the file
      const uint64_t weights = std::string(p).rfind("mlp.", 0) == 0 ? 8192 : 4096;
      shape.stored_base_bytes[name] = layer == 0 ? weights / 32 * 20 : weights / 32 * 34;
      stored += shape.stored_base_bytes[name];
    }
  }
  MemoryModelConstants constants;
  constants.device_overhead_bytes = kOverhead;
  const MemoryModel m(shape, constants);
  EXPECT_EQ(m.base_parameters(), static_cast<int64_t>(P)) << "the same weights, stored smaller";
  EXPECT_EQ(m.quantized_parameters(), 2 * 40960 - 4096);
  EXPECT_EQ(m.quantized_bytes(), stored);
  EXPECT_EQ(stored, 4u * 2560 + 3 * 5120 + 3 * 4352 + 3 * 8704);
  EXPECT_EQ(m.base_weight_bytes(), stored + 26240u + 4096u * 2) << "the F16 projection counts in bf16";
  EXPECT_EQ(m.dequantize_buffer_bytes(), 8192u * 2);
  EXPECT_EQ(base_format(BaseQuantization::gguf, true), BaseFormat::gguf);
  const MemoryEstimate none = m.estimate(choice(OffloadPolicy::none));
  EXPECT_EQ(none.bytes.at(D, C::weights), m.base_weight_bytes() + 2048u * 2);
}

TEST(MemoryModel, Llama3EightBillionNf4IsUnder0Point6BytesPerWeight) {
  TrainingShape shape;
  shape.model.vocab_size = 128256;
  shape.model.hidden_size = 4096;
  shape.model.intermediate_size = 14336;
  shape.model.num_key_value_heads = 8;
  shape.lora_rank = 16;
  shape.base = BaseFormat::nf4_double_quant;
  const MemoryModel m(shape);
  // Per layer 2*4096^2 (q, o) + 2*4096*1024 (k, v) + 3*4096*14336 weights; 32 layers.
  const int64_t projections = 32 * (2 * 4096LL * 4096 + 2 * 4096LL * 1024 + 3 * 4096LL * 14336);
  EXPECT_EQ(m.quantized_parameters(), projections);
  const double per_weight = static_cast<double>(m.quantized_bytes()) / static_cast<double>(projections);
  EXPECT_NEAR(per_weight, 0.5 + 1.0 / 64 + 4.0 / (64 * 256), 1e-6);
  EXPECT_LE(per_weight, 0.6);
  EXPECT_EQ(m.dequantize_buffer_bytes(), 14336u * 4096u * 2u);
}

TEST(MemoryModel, SevenBillionByHand) {
  // Llama-2-7B: embedding and head 32000*4096 each; per layer 4*4096^2 + 3*4096*11008 + 2*4096.
  TrainingShape shape;  // ModelShape's defaults are Llama-2-7B's shape
  const MemoryModel m(shape);
  const int64_t expected = 2 * 32000LL * 4096 + 32 * (4 * 4096LL * 4096 + 3 * 4096LL * 11008 + 2 * 4096) + 4096;
  EXPECT_EQ(m.base_parameters(), expected);
  EXPECT_EQ(m.base_parameters(), 6738415616LL);
}

}  // namespace
}  // namespace ferry::offload
