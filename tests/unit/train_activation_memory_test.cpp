// What a training step holds on the emulated device, activations included (the trainer's
// activation meter), with the LM head's logits all at once and in chunks: the same losses and
// weights, and a fraction of the activation bytes; and with the checkpointed layers' inputs
// offloaded to the host: the same losses and weights, and two layers' inputs on the device instead
// of all of them. The memory model's activation estimate is held against the measured peaks.
#include <gtest/gtest.h>

#include "offload/memory_model.h"
#include "tests/support/offload_training.h"

namespace ferry::offload_test {
namespace {

using offload::MemoryCategory;
using offload::MemoryEstimate;
using offload::MemoryTier;
using offload::PlacementChoice;

// A 32k vocabulary on the small model: at 2 × 256 tokens the logits (fp32) are 64 MiB, far more
// than the layers' activations.
RunSpec big_vocabulary(int64_t logits_chunk) {
  RunSpec spec;
  spec.shape.vocab_size = 32000;
  spec.shape.max_position_embeddings = 256;
  spec.length = 256;
  spec.micro_batch_size = 2;
  spec.grad_accumulation = 1;
  spec.steps = 2;
  spec.head_op = true;
  spec.logits_chunk = logits_chunk;
  return spec;
}

uint64_t activation_peak(const RunResult& run) {
  return run.memory.peak.at(offload::MemoryTier::device, offload::MemoryCategory::activations);
}

offload::MemoryModel memory_model(const RunSpec& spec) {
  offload::TrainingShape shape;
  shape.model = spec.shape;
  shape.precision = spec.precision;
  shape.seq_len = spec.length;
  shape.logits_chunk = spec.logits_chunk;
  return offload::MemoryModel(shape, offload::MemoryModelConstants{.device_overhead_bytes = 0});  // no CUDA context
}

TEST(ActivationMemory, ChunkedHeadTrainsTheSameWithAFractionOfTheActivations) {
  const RunSpec full_spec = big_vocabulary(0), chunked_spec = big_vocabulary(64);
  const RunResult full = train(full_spec, "logits_full");
  const RunResult chunked = train(chunked_spec, "logits_chunked");
  // The same losses to 1e-6; the weights after two AdamW steps to 1e-5 (Adam's update divides by
  // the gradients' scale, so rounding-level gradient differences on near-zero gradients grow).
  EXPECT_LE(worst_relative(chunked.losses, full.losses), 1e-6);
  EXPECT_LE(worst_weight_difference(chunked.weights, full.weights), 1e-5);
  const uint64_t logits_bytes = 2 * 256 * 32000 * 4;
  std::cout << "activation peak: full logits " << activation_peak(full) << " bytes, chunked "
            << activation_peak(chunked) << " bytes (one fp32 logits tensor: " << logits_bytes << ")\n";
  // The full path holds several fp32 logit-sized tensors at its peak; the chunked one none.
  EXPECT_GT(activation_peak(full), 2 * logits_bytes);
  EXPECT_LT(activation_peak(chunked), logits_bytes / 2);
  EXPECT_LT(activation_peak(chunked) * 6, activation_peak(full));

  // The memory model's estimate of the whole device (weights, gradients, moments, activations:
  // docs/offload.md) against the measured peak. The meter counts gradients in flight as
  // activations (the engine takes them over after backward), so the totals are what compare.
  for (const auto& [spec, run] : {std::pair{full_spec, full}, std::pair{chunked_spec, chunked}}) {
    PlacementChoice none;
    none.micro_batch_size = spec.micro_batch_size;
    const MemoryEstimate estimate = memory_model(spec).estimate(none);
    const uint64_t measured = run.memory.tier_peak[static_cast<size_t>(MemoryTier::device)];
    const double ratio = static_cast<double>(measured) / static_cast<double>(estimate.device_total());
    std::cout << "logits_chunk " << spec.logits_chunk << ": device peak measured " << measured << ", estimated "
              << estimate.device_total() << " (measured / estimated " << ratio << "); activations measured "
              << activation_peak(run) << ", estimated " << estimate.bytes.at(MemoryTier::device, MemoryCategory::activations)
              << "\n";
    EXPECT_GT(ratio, 0.8);
    EXPECT_LT(ratio, 1.25);
  }
}

TEST(ActivationMemory, DevicePeakIncludesActivationsAndEngineBytes) {
  RunSpec spec;
  spec.steps = 2;
  const RunResult run = train(spec, "peak_parts");
  const auto& peak = run.memory.peak;
  const uint64_t engine = peak.at(offload::MemoryTier::device, offload::MemoryCategory::weights) +
                          peak.at(offload::MemoryTier::device, offload::MemoryCategory::master) +
                          peak.at(offload::MemoryTier::device, offload::MemoryCategory::moments);
  EXPECT_GT(activation_peak(run), 0u);
  EXPECT_GT(run.memory.tier_peak[0], engine);
  EXPECT_LE(run.memory.tier_peak[0], engine + peak.at(offload::MemoryTier::device, offload::MemoryCategory::grads) +
                                         activation_peak(run));
}

// Eight checkpointed layers, so that the inputs they keep are worth measuring.
RunSpec deep_checkpointed(bool activation_offload, OffloadPolicy policy = OffloadPolicy::none) {
  RunSpec spec;
  spec.shape.num_hidden_layers = 8;
  spec.shape.max_position_embeddings = 128;
  spec.length = 128;
  spec.micro_batch_size = 2;
  spec.grad_accumulation = 2;
  spec.steps = 3;
  spec.checkpointing = true;
  spec.policy = policy;
  spec.activation_offload = activation_offload;
  return spec;
}

TEST(ActivationMemory, OffloadedCheckpointsTrainTheSameWithTwoLayersInputsOnTheDevice) {
  const RunSpec kept_spec = deep_checkpointed(false), offloaded_spec = deep_checkpointed(true);
  const RunResult kept = train(kept_spec, "checkpoints_kept");
  const RunResult offloaded = train(offloaded_spec, "checkpoints_offloaded");
  // Copies out and back: bit for bit the same computation.
  EXPECT_EQ(worst_relative(offloaded.losses, kept.losses), 0.0);
  EXPECT_EQ(worst_weight_difference(offloaded.weights, kept.weights), 0.0);

  const int64_t layers = kept_spec.shape.num_hidden_layers;
  const uint64_t one_input = 2 * 128 * 64 * 4;  // (B, T, C) fp32: what a checkpointed layer keeps
  const uint64_t saved = activation_peak(kept) - activation_peak(offloaded);
  const uint64_t host = offloaded.memory.peak.at(MemoryTier::host, MemoryCategory::activations);
  std::cout << "activation peak on the device: inputs kept " << activation_peak(kept) << " bytes, offloaded "
            << activation_peak(offloaded) << " bytes (saved " << saved << " = "
            << static_cast<double>(saved) / static_cast<double>(one_input) << " layer inputs of " << one_input
            << " bytes); host peak " << host << " bytes\n";
  // Every layer's input waits on the host (one micro-batch's graph at a time) ...
  EXPECT_EQ(host, static_cast<uint64_t>(layers) * one_input);
  EXPECT_EQ(kept.memory.peak.at(MemoryTier::host, MemoryCategory::activations), 0u);
  // ... and the device keeps at most two of them: the peak drops by the other layers' inputs.
  EXPECT_GE(saved, static_cast<uint64_t>(layers - 2) * one_input);
  EXPECT_LE(saved, static_cast<uint64_t>(layers) * one_input);

  // The memory model's estimate of both (device and host) against what was measured.
  for (const auto& [spec, run] : {std::pair{kept_spec, kept}, std::pair{offloaded_spec, offloaded}}) {
    PlacementChoice choice;
    choice.micro_batch_size = spec.micro_batch_size;
    choice.layer_checkpointed.assign(static_cast<size_t>(layers), true);
    choice.activation_offload = spec.activation_offload;
    const MemoryEstimate estimate = memory_model(spec).estimate(choice);
    const uint64_t measured = run.memory.tier_peak[static_cast<size_t>(MemoryTier::device)];
    const double ratio = static_cast<double>(measured) / static_cast<double>(estimate.device_total());
    std::cout << "activation_offload " << spec.activation_offload << ": device peak measured " << measured
              << ", estimated " << estimate.device_total() << " (measured / estimated " << ratio << ")\n";
    EXPECT_GT(ratio, 0.8);
    EXPECT_LT(ratio, 1.25);
    EXPECT_EQ(estimate.bytes.at(MemoryTier::host, MemoryCategory::activations),
              run.memory.peak.at(MemoryTier::host, MemoryCategory::activations));
  }
}

TEST(ActivationMemory, OffloadedCheckpointsUnderParamsTrainAsTheBaseline) {
  // Under `params` every group is recomputed because its weights are paged; the offloaded inputs
  // ride along with the paging hooks.
  const RunResult baseline = train(deep_checkpointed(false), "offload_baseline");
  const RunResult paged = train(deep_checkpointed(true, OffloadPolicy::params), "offload_params");
  EXPECT_LE(worst_relative(paged.losses, baseline.losses), 1e-6);
  EXPECT_LE(worst_weight_difference(paged.weights, baseline.weights), 1e-6);
  EXPECT_GT(paged.memory.peak.at(MemoryTier::host, MemoryCategory::activations), 0u);
}

}  // namespace
}  // namespace ferry::offload_test
