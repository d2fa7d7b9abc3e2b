// The offload policies on a real GPU against the CPU: the model is built on the host and the
// engine places it (whole under `none`, resident chunks under `optimizer` / `params`), gradients
// cross PCIe on the side stream into pinned buffers, CpuAdamW updates the host copies. The same
// steps' losses and weights must match the CPU run (fp32; TF32 is off by default in libtorch),
// and under `params` the bytes the CUDA allocator really holds for weights stay near two chunks;
// so must the overlapped step (offload.overlap_step) without clipping. With the checkpointed
// layers' inputs offloaded to pinned host memory on the side stream (train.activation_offload),
// the losses are the GPU run's without it, bit for bit, and the allocator's peak drops.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <torch/cuda.h>
#ifdef FERRY_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "tests/support/offload_training.h"
#include "src/model/family/model_tensors.h"

namespace ferry {

void PrintTo(OffloadPolicy policy, std::ostream* out) { *out << enum_name(policy); }  // test names

namespace {

using namespace offload_test;  // NOLINT: the harness is this test's vocabulary

class OffloadCuda : public ::testing::TestWithParam<OffloadPolicy> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "[needs gpu] no CUDA device";
  }
};

const RunResult& cpu_reference() {
  static const RunResult result = [] {
    RunSpec spec;
    spec.steps = 8;
    return train(spec, "cuda_reference");
  }();
  return result;
}

TEST_P(OffloadCuda, LossesAndWeightsMatchTheCpu) {
  RunSpec spec;
  spec.steps = 8;
  spec.policy = GetParam();
  spec.device = c10::Device(c10::kCUDA, 0);
  const RunResult gpu = train(spec, std::string("cuda_") + std::string(enum_name(GetParam())));
  const RunResult& cpu = cpu_reference();
  expect_trains_like(gpu, cpu, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Policies, OffloadCuda,
                         ::testing::Values(OffloadPolicy::none, OffloadPolicy::optimizer, OffloadPolicy::params),
                         [](const auto& info) { return std::string(enum_name(info.param)); });

// offload.overlap_step on a GPU: gradients are drained and chunks updated on the background
// thread while backward's kernels still run; the device copies are refreshed only after them.
TEST_F(OffloadCuda, OverlappedStepMatchesTheCpu) {
  for (OffloadPolicy policy : {OffloadPolicy::optimizer, OffloadPolicy::params}) {
    RunSpec reference;
    reference.steps = 8;
    reference.max_grad_norm = 0;
    RunSpec spec = reference;
    spec.policy = policy;
    spec.overlap_step = true;
    spec.device = c10::Device(c10::kCUDA, 0);
    const std::string name(enum_name(policy));
    const RunResult cpu = train(reference, "cuda_overlap_reference_" + name);
    const RunResult gpu = train(spec, "cuda_overlap_" + name);
    expect_trains_like(gpu, cpu, 1e-4, name);
    EXPECT_EQ(gpu.chunks_finished_during_backward, 8 * 4) << name;
  }
}

// What the engine counts is what the device holds: under `params` the model's weights never go
// to the GPU whole, so the allocator's peak stays far below the model size.
TEST_F(OffloadCuda, ParamsNeverHoldsTheWholeModelOnTheGpu) {
#ifndef FERRY_WITH_CUDA
  GTEST_SKIP() << "[needs gpu] built without CUDA (FERRY_CUDA=OFF?)";
#else
  RunSpec spec;
  spec.steps = 2;
  spec.policy = OffloadPolicy::params;
  spec.shape = demo_shape();
  spec.shape.num_hidden_layers = 8;
  spec.device = c10::Device(c10::kCUDA, 0);
  torch::cuda::synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
  const RunResult run = train(spec, "cuda_params_peak");
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  const auto peak = static_cast<uint64_t>(stats.allocated_bytes[0].peak);  // all pools
  const uint64_t model_bytes = 4 * static_cast<uint64_t>(parameter_count(spec.shape));
  EXPECT_LT(run.memory.tier_peak[0], model_bytes / 2);
  // Activations of a 3 x 24 batch are small next to the weights; the peak stays under the model.
  EXPECT_LT(peak, model_bytes) << "peak allocated " << peak << " bytes of a " << model_bytes << "-byte model";
#endif
}

// The allocator's peak bytes of one run (all pools), from a clean cache.
#ifdef FERRY_WITH_CUDA
uint64_t cuda_peak_of(const RunSpec& spec, const std::string& name, RunResult* result) {
  torch::cuda::synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
  *result = train(spec, name);
  torch::cuda::synchronize();
  return static_cast<uint64_t>(c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak);
}
#endif

TEST_F(OffloadCuda, OffloadedActivationsTrainTheSameWithALowerPeak) {
#ifndef FERRY_WITH_CUDA
  GTEST_SKIP() << "[needs gpu] built without CUDA (FERRY_CUDA=OFF?)";
#else
  RunSpec spec;
  spec.steps = 3;
  spec.shape.num_hidden_layers = 12;
  spec.shape.hidden_size = 256;
  spec.shape.num_attention_heads = 8;
  spec.shape.head_dim = 32;
  spec.shape.intermediate_size = 256;
  spec.shape.max_position_embeddings = 512;
  spec.length = 512;
  spec.micro_batch_size = 4;
  spec.grad_accumulation = 1;
  spec.checkpointing = true;
  spec.device = c10::Device(c10::kCUDA, 0);
  RunResult kept, offloaded;
  const uint64_t kept_peak = cuda_peak_of(spec, "cuda_inputs_kept", &kept);
  spec.activation_offload = true;
  const uint64_t offloaded_peak = cuda_peak_of(spec, "cuda_inputs_offloaded", &offloaded);
  EXPECT_EQ(worst_relative(offloaded.losses, kept.losses), 0.0);
  EXPECT_EQ(worst_weight_difference(offloaded.weights, kept.weights), 0.0);
  const uint64_t one_input = 4ull * 512 * 256 * 4;  // (B, T, C) fp32
  const uint64_t host = offloaded.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::activations);
  std::cout << "CUDA allocator peak: inputs kept " << kept_peak << " bytes, offloaded " << offloaded_peak
            << " bytes; saved " << (static_cast<double>(kept_peak) - static_cast<double>(offloaded_peak)) / one_input
            << " layer inputs of " << one_input << " bytes; host " << host << " bytes\n";
  EXPECT_EQ(host, 12 * one_input);
  // Ten of the twelve inputs leave the device (allow one for the allocator's rounding and timing).
  EXPECT_GE(kept_peak, offloaded_peak + 9 * one_input);
#endif
}

}  // namespace
}  // namespace ferry
