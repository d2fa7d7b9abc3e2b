// The offload policies under the shared training loop, on the CPU-emulated device tier:
//   same numbers   20 steps under `optimizer` and `params` (chunk per block, packed chunks,
//                  prefetch 2, a tied model) give the losses and weights of `none` (fp32: 1e-6
//                  relative; bf16: the tolerance docs/offload.md states);
//   bounded memory the accountant's peak device bytes for the demo model's shape under each policy
//                  (none 16 B/param in fp32, optimizer the weights + one gradient in flight,
//                  params two chunks + one gradient in flight);
//   overlap_step   AdamW applied chunk by chunk during the last backward gives the losses and
//                  weights of `none` without clipping (untied and tied, optimizer and params),
//                  and all but the last chunks of each step are handed over during backward
//                  (with clipping too: their gradients and norms are finished there); in
//                  bf16 the overlapped step equals the step after backward; a NaN gradient
//                  stops it at that chunk; a model run forward twice is finished after backward;
//   auto           never exceeds its budget across a sweep of budgets, rejects an impossible one
//                  with the planner's explanation;
//   one budget     two demo-sized models: make_resident swaps them, both do not fit at once (a
//                  clear error), and the weights survive the trips;
//   families       Qwen3's q/k norms and Mistral's sliding window under params with gradient
//                  checkpointing give the losses and weights of `none`.
// `none` is the reference: PlainEngine is tested against torch::optim::AdamW in
// offload_engine_test.cpp, so agreeing with it ties every policy to torch.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "core/config/config_io.h"
#include "core/error.h"
#include "offload/auto_policy.h"
#include "offload/chunked_engine.h"
#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/model_state.h"
#include "tests/support/offload_training.h"
#include "src/model/family/model_tensors.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using namespace offload_test;  // NOLINT: the harness is this test's vocabulary

const RunResult& none_fp32() {
  static const RunResult result = train({}, "none");
  return result;
}

TEST(OffloadPolicies, OptimizerGivesTheLossesOfNone) {
  RunSpec spec;
  spec.policy = OffloadPolicy::optimizer;
  const RunResult run = train(spec, "optimizer");
  ASSERT_EQ(run.losses.size(), 20u);
  EXPECT_LT(none_fp32().losses.back(), none_fp32().losses.front());  // it trains at all
  expect_trains_like(run, none_fp32(), 1e-6);
  // With clipping the update waits for backward, but every chunk except the embedding's had its
  // gradients drained and its norms taken during backward, every step.
  EXPECT_EQ(run.chunks_finished_during_backward, 20 * 4);
}

TEST(OffloadPolicies, ParamsGivesTheLossesOfNone) {
  RunSpec spec;
  spec.policy = OffloadPolicy::params;
  const RunResult run = train(spec, "params");
  expect_trains_like(run, none_fp32(), 1e-6);
}

TEST(OffloadPolicies, ParamsWithPackedChunksAndDeeperPrefetchGivesTheLossesOfNone) {
  RunSpec spec;
  spec.policy = OffloadPolicy::params;
  spec.chunk_size = 48 << 10;  // several small tensors per chunk, chunks across block boundaries
  spec.prefetch = 2;
  spec.kept_groups = {"embed"};  // a mixed plan: one group kept, the rest paged
  const RunResult run = train(spec, "params_packed");
  expect_trains_like(run, none_fp32(), 1e-6);
}

TEST(OffloadPolicies, TiedEmbeddingsUnderParamsGiveTheLossesOfNone) {
  RunSpec reference;
  reference.shape = small_shape(/*tied=*/true);
  reference.steps = 10;
  RunSpec paged = reference;
  paged.policy = OffloadPolicy::params;
  const RunResult a = train(reference, "tied_none");
  const RunResult b = train(paged, "tied_params");
  // The tied matrix's two gradient contributions are summed in a different order (autograd adds
  // them before accumulating; the host accumulator adds them one by one): rounding only.
  EXPECT_LE(worst_relative(b.losses, a.losses), 1e-5);
}

// Without clipping, the reference and the overlapped runs (offload.overlap_step).
const RunResult& none_unclipped() {
  static const RunResult result = [] {
    RunSpec spec;
    spec.max_grad_norm = 0;
    return train(spec, "none_unclipped");
  }();
  return result;
}

TEST(OffloadPolicies, OverlappedStepUnderOptimizerGivesTheLossesOfNone) {
  RunSpec spec;
  spec.policy = OffloadPolicy::optimizer;
  spec.max_grad_norm = 0;
  spec.overlap_step = true;
  const RunResult run = train(spec, "optimizer_overlap");
  ASSERT_EQ(run.losses.size(), 20u);
  expect_trains_like(run, none_unclipped(), 1e-6);
  // 5 chunks (embed, 3 layers, head): all but the embedding's go during backward, every step.
  EXPECT_EQ(run.chunks_finished_during_backward, 20 * 4);
}

TEST(OffloadPolicies, OverlappedStepUnderParamsWithPackedChunksGivesTheLossesOfNone) {
  RunSpec spec;
  spec.policy = OffloadPolicy::params;
  spec.max_grad_norm = 0;
  spec.overlap_step = true;
  spec.chunk_size = 48 << 10;  // chunks across block boundaries: complete only after their lowest block
  spec.prefetch = 2;
  const RunResult run = train(spec, "params_overlap");
  expect_trains_like(run, none_unclipped(), 1e-6);
  EXPECT_GT(run.chunks_finished_during_backward, 20);
}

TEST(OffloadPolicies, OverlappedStepWithTiedEmbeddingsGivesTheLossesOfNone) {
  // The tied matrix gets gradients from the head and from the embedding, in two separate
  // recomputed backwards under params: its first one must not be taken for the end of the model.
  RunSpec reference;
  reference.shape = small_shape(/*tied=*/true);
  reference.steps = 10;
  reference.max_grad_norm = 0;
  RunSpec overlapped = reference;
  overlapped.policy = OffloadPolicy::params;
  overlapped.overlap_step = true;
  const RunResult a = train(reference, "tied_none_unclipped");
  const RunResult b = train(overlapped, "tied_params_overlap");
  expect_trains_like(b, a, 1e-5);
  // The head and the first two layers go during backward; the first layer once the embedding's
  // gradient is complete, at the end, with it.
  EXPECT_EQ(b.chunks_finished_during_backward, 10 * 3);
}

// The families' switches under the engine: Qwen3's q/k norms are parameters like the others
// (paged, stepped, checkpointed), and Mistral's sliding window (8 < the 24-token sequences) holds
// inside recomputed layers: params with gradient checkpointing trains as none does.
TEST(OffloadPolicies, Qwen3NormsAndASlidingWindowUnderParamsWithCheckpointingGiveTheLossesOfNone) {
  RunSpec reference;
  reference.shape = small_shape();
  reference.shape.qk_norm = QkNorm::per_head;
  reference.shape.head_dim = 32;  // != hidden / heads
  reference.shape.sliding_window = 8;
  reference.steps = 10;
  RunSpec paged = reference;
  paged.policy = OffloadPolicy::params;
  paged.checkpointing = true;
  const RunResult a = train(reference, "families_none");
  const RunResult b = train(paged, "families_params_checkpointed");
  EXPECT_LT(a.losses.back(), a.losses.front());
  expect_trains_like(b, a, 1e-6);
  const std::string q_norm = "model.layers.2.self_attn.q_norm.weight";
  ASSERT_TRUE(b.weights.count(q_norm));
  EXPECT_GT((b.weights.at(q_norm) - 1.0).abs().max().item<double>(), 1e-4);  // it was trained
}

TEST(OffloadPolicies, ACheckpointOfNoneResumesUnderParamsExactly) {
  // The optimizer state file does not depend on the policy: stop a `none` run during step 4 of 8,
  // resume it under `params`, and it continues as the uninterrupted `none` run.
  RunSpec whole;
  whole.steps = 8;
  const RunResult reference = train(whole, "resume_reference");
  RunSpec second = whole;
  second.policy = OffloadPolicy::params;
  const RunResult resumed = crash_and_resume(whole, 4, second, "resume_across");
  // The crash came after step 4's loss but before its checkpoint: the run resumes from step 3.
  ASSERT_EQ(resumed.losses.size(), 5u);
  const std::vector<double> tail(reference.losses.begin() + 3, reference.losses.end());
  EXPECT_LE(worst_relative(resumed.losses, tail), 1e-6);
  EXPECT_LE(worst_weight_difference(resumed.weights, reference.weights), 1e-6);
}

// offload.optimizer_state int8: the host moments in 8 bits (kernels/cpu/adamw_int8.h), 2.03 bytes
// per parameter instead of 8. Training follows fp32 moments closely; a checkpoint (fp32 moments in
// the file, whatever the format) resumes an int8 run exactly, under another policy too.
TEST(OffloadPolicies, Int8MomentsTrainLikeFp32AndResumeExactly) {
  RunSpec fp32;
  fp32.policy = OffloadPolicy::optimizer;
  fp32.steps = 12;
  RunSpec int8 = fp32;
  int8.optimizer_state = OptimizerState::int8;
  const RunResult a = train(fp32, "int8_reference"), b = train(int8, "int8_moments");
  EXPECT_LE(worst_relative(b.losses, a.losses), 0.02);
  EXPECT_GT(worst_weight_difference(b.weights, a.weights), 0.0);  // really another state
  const uint64_t params = static_cast<uint64_t>(parameter_count(small_shape()));
  const uint64_t fp32_moments = a.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::moments);
  const uint64_t int8_moments = b.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::moments);
  EXPECT_EQ(fp32_moments, 8 * params);
  EXPECT_LT(int8_moments, 2 * params + 2 * 4 * (params / 256 + 20));  // + a partial block per tensor
  EXPECT_GE(int8_moments, 2 * params);

  RunSpec second = int8;
  second.policy = OffloadPolicy::params;
  const RunResult resumed = crash_and_resume(int8, 6, second, "int8_resume");
  ASSERT_EQ(resumed.losses.size(), 7u);  // from the checkpoint of step 5
  const std::vector<double> tail(b.losses.begin() + 5, b.losses.end());
  EXPECT_LE(worst_relative(resumed.losses, tail), 1e-6);
  EXPECT_LE(worst_weight_difference(resumed.weights, b.weights), 1e-6);
}

// `spec` (12 steps under optimizer) with fp32 and then int8 moments, stopped after step 6 and
// resumed under `params` from the checkpoint of step 5, repeats the uninterrupted run's last 7
// losses and its weights within `tolerance` (0: bit for bit). `fp32_whole`: spec's own run.
void expect_resumes_under_params(const RunSpec& spec, const RunResult& fp32_whole, double tolerance,
                                 const std::string& label) {
  for (OptimizerState moments : {OptimizerState::fp32, OptimizerState::int8}) {
    RunSpec first = spec;
    first.optimizer_state = moments;
    const std::string name = label + "_" + std::string(enum_name(moments));
    const RunResult whole = moments == OptimizerState::fp32 ? fp32_whole : train(first, name + "_whole");
    RunSpec second = first;
    second.policy = OffloadPolicy::params;
    const RunResult resumed = crash_and_resume(first, 6, second, name + "_resume");
    ASSERT_EQ(resumed.losses.size(), 7u) << name;  // from the checkpoint of step 5
    const std::vector<double> tail(whole.losses.begin() + 5, whole.losses.end());
    EXPECT_LE(worst_relative(resumed.losses, tail), tolerance) << name;
    EXPECT_LE(worst_weight_difference(resumed.weights, whole.weights), tolerance) << name;
  }
}

// offload.master_weights bf16_kahan: the bf16 weights plus a bf16 compensation are the master
// (kernels/cpu/adamw_kahan.h), 2 bytes per parameter on the host instead of an fp32 copy's 4. It
// trains like fp32 master weights to bf16 rounding, and a checkpoint (the decoded fp32 master in
// the file) resumes it exactly, under another policy and with int8 moments too.
TEST(OffloadPolicies, Bf16KahanMasterWeightsTrainLikeFp32MasterAndResumeExactly) {
  RunSpec fp32;
  fp32.precision = Precision::bf16;
  fp32.policy = OffloadPolicy::optimizer;
  fp32.steps = 12;
  RunSpec kahan = fp32;
  kahan.master_weights = MasterWeights::bf16_kahan;
  const RunResult a = train(fp32, "kahan_reference"), b = train(kahan, "kahan_master");
  EXPECT_LE(worst_relative(b.losses, a.losses), 1e-2);
  EXPECT_GT(worst_weight_difference(b.weights, a.weights), 0.0);  // really another master
  const uint64_t params = static_cast<uint64_t>(parameter_count(small_shape()));
  EXPECT_EQ(a.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::master), 4 * params);
  EXPECT_EQ(b.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::master), 2 * params);

  expect_resumes_under_params(kahan, b, 1e-6, "kahan");
}

// offload.master_weights bf16_stochastic: the bf16 weights alone are the master, each update
// rounded stochastically (kernels/cpu/adamw_stochastic.h): no host bytes for a master at all. It
// trains like an fp32 master to bf16 noise; the rounding follows train.seed; a checkpoint resumes
// it bit for bit (the same seed and step count give the same random bits), under another policy
// and with int8 moments too.
TEST(OffloadPolicies, Bf16StochasticMasterWeightsTrainLikeFp32MasterAndResumeBitForBit) {
  RunSpec fp32;
  fp32.precision = Precision::bf16;
  fp32.policy = OffloadPolicy::optimizer;
  fp32.steps = 12;
  RunSpec stochastic = fp32;
  stochastic.master_weights = MasterWeights::bf16_stochastic;
  const RunResult a = train(fp32, "stochastic_reference"), b = train(stochastic, "stochastic_master");
  EXPECT_LE(worst_relative(b.losses, a.losses), 1e-2);
  EXPECT_GT(worst_weight_difference(b.weights, a.weights), 0.0);  // really another master
  EXPECT_EQ(b.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::master), 0u);
  RunSpec other_seed = stochastic;
  other_seed.seed = 7;
  const RunResult c = train(other_seed, "stochastic_other_seed");
  EXPECT_GT(worst_weight_difference(c.weights, b.weights), 0.0);  // the seed picks the rounding
  EXPECT_EQ(train(stochastic, "stochastic_again").weights.at("model.embed_tokens.weight")
                .equal(b.weights.at("model.embed_tokens.weight")),
            true);  // and the same seed repeats it

  expect_resumes_under_params(stochastic, b, 0.0, "stochastic");  // bit for bit
}

// offload.optimizer_state_tier nvme: the optimizer state in a working file under offload.nvme_dir
// (here the local disk), streamed through the staging ring in windows of 2048 parameters (several
// per tensor, and more windows than ring slots), gives the host tier's run bit for bit: the same
// kernels on the same values, whatever the state's format. 20 steps under both chunked policies.
TEST(OffloadPolicies, NvmeStateTierTrainsBitForBitLikeTheHostTier) {
  struct Variant {
    const char* name;
    Precision precision;
    OptimizerState moments;
    MasterWeights master;
  };
  for (const Variant& v : {Variant{"fp32", Precision::fp32, OptimizerState::fp32, MasterWeights::fp32},
                           Variant{"int8", Precision::fp32, OptimizerState::int8, MasterWeights::fp32},
                           Variant{"bf16", Precision::bf16, OptimizerState::fp32, MasterWeights::fp32},
                           Variant{"bf16_kahan_int8", Precision::bf16, OptimizerState::int8, MasterWeights::bf16_kahan},
                           Variant{"bf16_stochastic", Precision::bf16, OptimizerState::fp32,
                                   MasterWeights::bf16_stochastic}}) {
    for (OffloadPolicy policy : {OffloadPolicy::optimizer, OffloadPolicy::params}) {
      RunSpec host;
      host.precision = v.precision;
      host.optimizer_state = v.moments;
      host.master_weights = v.master;
      host.policy = policy;
      RunSpec nvme = host;
      nvme.nvme = true;
      const std::string name = std::string(v.name) + "_" + std::string(enum_name(policy));
      const RunResult a = train(host, "host_tier_" + name), b = train(nvme, "nvme_tier_" + name);
      ASSERT_EQ(b.losses.size(), 20u) << name;
      EXPECT_EQ(b.losses, a.losses) << name;
      EXPECT_EQ(worst_weight_difference(b.weights, a.weights), 0.0) << name;
      // The state is on the NVMe tier, not in host memory: only the staging ring is.
      EXPECT_GT(b.memory.peak.at(offload::MemoryTier::nvme, offload::MemoryCategory::moments), 0u) << name;
      EXPECT_EQ(b.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::master), 0u) << name;
      // Then the parameters too (offload.params_tier nvme): the same run again.
      nvme.params_on_nvme = true;
      const RunResult c = train(nvme, "nvme_params_" + name);
      EXPECT_EQ(c.losses, a.losses) << name;
      EXPECT_EQ(worst_weight_difference(c.weights, a.weights), 0.0) << name;
      EXPECT_GT(c.memory.peak.at(offload::MemoryTier::nvme, offload::MemoryCategory::weights), 0u) << name;
      EXPECT_EQ(c.memory.peak.at(offload::MemoryTier::host, offload::MemoryCategory::weights), 0u) << name;
    }
  }
}

// offload.overlap_step with the state and the parameters on the NVMe tier: the background worker
// streams each chunk's state windows as backward completes the chunk; the run equals the host
// tier's overlapped run bit for bit.
TEST(OffloadPolicies, NvmeStateTierWithTheOverlappedStep) {
  for (OffloadPolicy policy : {OffloadPolicy::optimizer, OffloadPolicy::params}) {
    RunSpec host;
    host.precision = Precision::bf16;
    host.policy = policy;
    host.steps = 10;
    host.max_grad_norm = 0;
    host.overlap_step = true;
    RunSpec nvme = host;
    nvme.nvme = true;
    nvme.params_on_nvme = true;
    const std::string name(enum_name(policy));
    const RunResult a = train(host, "overlap_host_" + name), b = train(nvme, "overlap_nvme_" + name);
    EXPECT_EQ(b.losses, a.losses) << name;
    EXPECT_EQ(worst_weight_difference(b.weights, a.weights), 0.0) << name;
    EXPECT_EQ(b.chunks_finished_during_backward, 10 * 4) << name;
  }
}

// A checkpoint of the NVMe tier is the optimizer state file every engine writes: a run on the NVMe
// tier resumes from its own checkpoint, and from the host tier's (and the host tier from it),
// giving the uninterrupted run's losses and weights bit for bit.
TEST(OffloadPolicies, NvmeStateTierResumesFromEitherTiersCheckpoint) {
  for (OptimizerState moments : {OptimizerState::fp32, OptimizerState::int8}) {
    RunSpec host;
    host.precision = Precision::bf16;
    host.optimizer_state = moments;
    host.policy = OffloadPolicy::optimizer;
    host.steps = 12;
    RunSpec nvme = host;
    nvme.nvme = true;
    nvme.params_on_nvme = moments == OptimizerState::int8;  // the parameters on NVMe too, once
    const std::string name(enum_name(moments));
    const RunResult whole = train(host, "nvme_whole_" + name);
    const std::vector<double> tail(whole.losses.begin() + 5, whole.losses.end());
    for (const auto& [first, second, label] : {std::tuple{nvme, nvme, "nvme_to_nvme"}, std::tuple{host, nvme, "host_to_nvme"},
                                               std::tuple{nvme, host, "nvme_to_host"}}) {
      const RunResult resumed = crash_and_resume(first, 6, second, std::string(label) + "_" + name);
      ASSERT_EQ(resumed.losses.size(), 7u) << label << " " << name;  // from the checkpoint of step 5
      EXPECT_EQ(resumed.losses, tail) << label << " " << name;
      EXPECT_EQ(worst_weight_difference(resumed.weights, whole.weights), 0.0) << label << " " << name;
    }
  }
}

TEST(OffloadPolicies, Bf16PoliciesStayWithinTheDocumentedToleranceOfNone) {
  RunSpec base;
  base.precision = Precision::bf16;
  base.steps = 10;
  const RunResult none = train(base, "bf16_none");
  for (OffloadPolicy policy : {OffloadPolicy::optimizer, OffloadPolicy::params}) {
    RunSpec spec = base;
    spec.policy = policy;
    const RunResult run = train(spec, std::string("bf16_") + std::string(enum_name(policy)));
    // `none` accumulates the two micro-batches' gradients in bf16 on the device, the offloaded
    // policies in fp32 on the host (docs/offload.md: 1e-2 relative on the loss in bf16).
    EXPECT_LE(worst_relative(run.losses, none.losses), 1e-2) << enum_name(policy);
  }
}

TEST(OffloadPolicies, Bf16OverlappedStepEqualsTheStepAfterBackward) {
  // Same host arithmetic (fp32 accumulators, fp32 masters, bf16 weights written by CpuAdamW), only
  // the time of the update differs: the runs agree to rounding noise.
  RunSpec after;
  after.precision = Precision::bf16;
  after.steps = 10;
  after.max_grad_norm = 0;
  for (OffloadPolicy policy : {OffloadPolicy::optimizer, OffloadPolicy::params}) {
    after.policy = policy;
    RunSpec during = after;
    during.overlap_step = true;
    const std::string name(enum_name(policy));
    const RunResult a = train(after, "bf16_after_" + name);
    const RunResult b = train(during, "bf16_during_" + name);
    expect_trains_like(b, a, 1e-6, name);
    EXPECT_EQ(b.chunks_finished_during_backward, 10 * 4) << name;
  }
}

// One small model under `optimizer`, driven step by step through the engine's calls (the tests
// below need to act between them), with the demo-like batches of the harness.
struct EngineDrivenModel {
  ModelShape shape = small_shape();
  CausalLM model{shape};
  std::unique_ptr<offload::ChunkedEngine> engine;
  RandomTokens data{shape.vocab_size, 2, 16, 5};

  EngineDrivenModel() {
    init_model_weights(*model, shape, 0.02, 3);
    offload::EngineOptions options;
    options.policy = OffloadPolicy::optimizer;
    engine = std::make_unique<offload::ChunkedEngine>(options);
    engine->add_model("policy", offload::group_parameters(*model, false), true);
  }
  io::TensorMap weights() {
    io::TensorMap out;
    engine->with_weights("policy", offload::ParameterEngine::WeightAccess::read, [&] {
      for (const auto& [key, t] : state_of(*model)) out[key] = t.clone();
    });
    return out;
  }
};

TEST(OffloadPolicies, OverlappedStepStopsAtTheFirstNonFiniteChunk) {
  // Layer 1's q_proj gradient is made NaN. Backward reaches the head, then layers 2, 1, 0, then the
  // embedding: the head and layer 2 are updated during backward before layer 1's NaN is seen,
  // layer 1 is not, and neither is anything after it (layer 0, the embedding).
  EngineDrivenModel run;
  for (auto& item : run.model->named_parameters()) {
    if (item.key() == "model.layers.1.self_attn.q_proj.weight") {
      item.value().register_hook([](const torch::Tensor& g) { return torch::full_like(g, std::nan("")); });
    }
  }
  const io::TensorMap before = run.weights();
  NextTokenLoss objective(*run.model);
  BackboneRunner runner(*run.engine, false);
  run.engine->zero_grad();
  run.engine->begin_last_backward(1e-2);
  objective.loss(run.data.next_train_batch(), runner).sum.backward();
  run.engine->finish_gradients();
  EXPECT_FALSE(std::isfinite(run.engine->gradient_norm()));
  run.engine->step(1e-2, 1.0);
  const io::TensorMap after = run.weights();
  const auto changed = [&](const std::string& name) { return !torch::equal(before.at(name), after.at(name)); };
  EXPECT_TRUE(changed("lm_head.weight"));
  EXPECT_TRUE(changed("model.norm.weight"));
  EXPECT_TRUE(changed("model.layers.2.mlp.up_proj.weight"));
  EXPECT_FALSE(changed("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_FALSE(changed("model.layers.1.mlp.up_proj.weight"));  // same chunk, finite gradient
  EXPECT_FALSE(changed("model.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE(changed("model.embed_tokens.weight"));
  for (const auto& [name, t] : after) EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
  EXPECT_EQ(run.engine->step_count("policy"), 1);
}

TEST(OffloadPolicies, OverlappedStepWaitsForBackwardWhenAModelRunsForwardTwice) {
  // Two forwards of one model in a micro-batch, each with its own backward (an objective that
  // runs DPO's chosen and rejected separately): the first backward's gradients are not the whole
  // of any chunk's. The engine then finishes every chunk after backward, and the step equals the
  // one after backward. (One backward over a summed loss would be safe: autograd accumulates a
  // parameter's gradient once, after every use of it.)
  const auto one_step = [](bool overlapped, int64_t* finished_during_backward) {
    EngineDrivenModel run;
    NextTokenLoss objective(*run.model);
    BackboneRunner runner(*run.engine, false);
    run.engine->zero_grad();
    run.engine->begin_last_backward(overlapped ? std::optional<double>(1e-2) : std::nullopt);
    const MicroBatch first = run.data.next_train_batch(), second = run.data.next_train_batch();
    const torch::Tensor a = objective.loss(first, runner).sum, b = objective.loss(second, runner).sum;
    a.backward();
    b.backward();
    run.engine->finish_gradients();
    run.engine->step(1e-2, 1.0);
    *finished_during_backward = run.engine->chunks_finished_during_backward();
    return run.weights();
  };
  int64_t during_overlapped = -1, during_after = -1;
  const io::TensorMap overlapped = one_step(true, &during_overlapped);
  const io::TensorMap after = one_step(false, &during_after);
  EXPECT_EQ(during_overlapped, 0);
  EXPECT_EQ(during_after, 0);
  for (const auto& [name, t] : after) EXPECT_TRUE(torch::equal(overlapped.at(name), t)) << name;
}

// Peak device bytes as the accountant counted them, demo model shape, fp32, one micro-batch.
offload::MemorySnapshot demo_memory(OffloadPolicy policy) {
  RunSpec spec;
  spec.policy = policy;
  spec.shape = demo_shape();
  spec.steps = 2;
  spec.grad_accumulation = 1;
  return train(spec, std::string("memory_") + std::string(enum_name(policy))).memory;
}

TEST(OffloadPolicies, PeakDeviceBytesOfTheDemoModelAreBoundedPerPolicy) {
  const ModelShape shape = demo_shape();
  const uint64_t params = static_cast<uint64_t>(parameter_count(shape));
  const uint64_t largest_tensor = static_cast<uint64_t>(shape.vocab_size * shape.hidden_size) * 4;  // embedding
  // A decoder layer's chunk (fp32, 256-byte aligned tensors) and the largest chunk (the embedding
  // or the head, both vocab x hidden).
  const uint64_t largest_chunk = largest_tensor + 4 * 256;
  using offload::MemoryCategory;
  using offload::MemoryTier;
  // The engine's own device bytes (the per-category peaks, activations apart: the trainer's
  // activation meter counts those on this CPU run, the same under every policy).
  auto engine_peak = [](const offload::MemorySnapshot& m) {
    uint64_t sum = 0;
    for (const MemoryCategory c : offload::kAllMemoryCategories) {
      if (c != MemoryCategory::activations) sum += m.peak.at(MemoryTier::device, c);
    }
    return sum;
  };

  const offload::MemorySnapshot none = demo_memory(OffloadPolicy::none);
  EXPECT_EQ(engine_peak(none), 16 * params);  // weights 4 + grads 4 + moments 8
  EXPECT_GT(none.peak.at(MemoryTier::device, MemoryCategory::activations), 0u);
  EXPECT_LE(none.tier_peak[0], 16 * params + none.peak.at(MemoryTier::device, MemoryCategory::activations));

  const offload::MemorySnapshot optimizer = demo_memory(OffloadPolicy::optimizer);
  EXPECT_LE(engine_peak(optimizer), 4 * params + 4 * 256 * 20 + largest_tensor);  // weights + one gradient
  EXPECT_GE(engine_peak(optimizer), 4 * params);
  EXPECT_GE(optimizer.peak.at(MemoryTier::host, MemoryCategory::moments), 8 * params);

  const offload::MemorySnapshot paged = demo_memory(OffloadPolicy::params);
  EXPECT_LE(engine_peak(paged), 2 * largest_chunk + largest_tensor);  // two chunks + one gradient
  EXPECT_LT(engine_peak(paged), engine_peak(optimizer) / 2);
  EXPECT_LT(paged.tier_peak[0], optimizer.tier_peak[0]);
  EXPECT_EQ(paged.current.at(MemoryTier::device, offload::MemoryCategory::weights), 0u);  // all paged out
}

TEST(OffloadPolicies, AutoStaysWithinEveryBudgetAndExplainsAnImpossibleOne) {
  const ModelShape shape = demo_shape();
  Config config;
  config.train.precision = Precision::fp32;
  config.train.micro_batch_size = 3;
  config.train.grad_accumulation = 1;
  config.data.max_length = 24;
  config.offload.policy = OffloadPolicy::auto_;
  std::set<OffloadPolicy> chosen;
  int rejected = 0;
  for (uint64_t mib : {64, 24, 12, 8, 6, 4, 3}) {
    config.offload.gpu_memory.bytes = mib << 20;
    std::optional<offload::AutoPolicy> resolved;
    try {
      resolved = offload::resolve_auto_policy(config, shape, 0);
    } catch (const ConfigError& e) {
      ++rejected;  // too small for any plan: says so, with the smallest footprint
      EXPECT_NE(std::string(e.what()).find("smallest device footprint"), std::string::npos) << e.what();
      continue;
    }
    const offload::AutoPolicy& plan = *resolved;
    chosen.insert(plan.options.policy);
    RunSpec spec;
    spec.policy = plan.options.policy;
    spec.kept_groups = plan.options.kept_groups;
    spec.budget = plan.options.device_budget;
    spec.shape = shape;
    spec.steps = 2;
    spec.micro_batch_size = plan.micro_batch_size;  // the plan may split the batch of 3
    spec.grad_accumulation = plan.grad_accumulation;
    EXPECT_EQ(plan.micro_batch_size * plan.grad_accumulation, 3) << plan.summary;
    const RunResult run = train(spec, "auto_" + std::to_string(mib));
    EXPECT_LE(run.memory.tier_peak[0], mib << 20) << plan.summary;
  }
  EXPECT_GE(chosen.size(), 2u);  // the sweep crosses at least one policy boundary
  EXPECT_GE(rejected, 1);
  config.offload.gpu_memory.bytes = 64 << 10;
  try {
    offload::resolve_auto_policy(config, shape, 0);
    FAIL() << "a 64 KiB budget cannot hold the demo model";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("offload.policy auto"), std::string::npos) << e.what();
  }
}

// With no device budget (CPU, no offload.gpu_memory) `auto` has nothing to fit: policy none, unless
// the config keeps optimizer state only the CPU optimizer has (int8 moments, a bf16 master, the
// NVMe tiers): then `optimizer`, which can hold it.
TEST(OffloadPolicies, AutoWithNothingToFitStillHonoursHostOptimizerState) {
  Config config;
  config.offload.policy = OffloadPolicy::auto_;
  EXPECT_EQ(offload::resolve_auto_policy(config, demo_shape(), 0).options.policy, OffloadPolicy::none);
  for (const std::string& set : {"offload.optimizer_state=int8", "offload.master_weights=bf16_stochastic",
                                 "offload.optimizer_state_tier=nvme", "offload.params_tier=nvme"}) {
    Config host_state = config;
    apply_override(host_state, set);
    const offload::AutoPolicy resolved = offload::resolve_auto_policy(host_state, demo_shape(), 0);
    EXPECT_EQ(resolved.options.policy, OffloadPolicy::optimizer) << set;
    EXPECT_NE(resolved.summary.find("needs the CPU optimizer"), std::string::npos) << resolved.summary;
  }
}

TEST(OffloadPolicies, PagingPastTheBudgetIsAClearError) {
  RunSpec spec;
  spec.policy = OffloadPolicy::params;
  spec.budget = 16 << 10;  // smaller than one chunk
  try {
    train(spec, "too_small");
    FAIL() << "training ran within a budget smaller than one chunk";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("offload.gpu_memory"), std::string::npos) << e.what();
  }
}

TEST(OffloadPolicies, TwoModelsShareOneBudgetThroughMakeResident) {
  const ModelShape shape = demo_shape();
  CausalLM policy(shape), reference(shape);
  init_model_weights(*policy, shape, 0.02, 1);
  init_model_weights(*reference, shape, 0.02, 2);
  const torch::Tensor ids = torch::randint(4, shape.vocab_size, {2, 12});
  torch::NoGradGuard no_grad;
  const torch::Tensor policy_logits = policy->forward(ids);
  const torch::Tensor reference_logits = reference->forward(ids);
  const uint64_t one_model = static_cast<uint64_t>(parameter_count(shape)) * 4;

  offload::EngineOptions options;
  options.policy = OffloadPolicy::optimizer;
  options.device_budget = one_model + (one_model / 2);  // one fits, two do not
  offload::ChunkedEngine engine(options);
  engine.add_model("policy", offload::group_parameters(*policy, false), true);
  try {
    engine.add_model("reference", offload::group_parameters(*reference, false), false);
    FAIL() << "both models were made resident within a budget for one and a half";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("offload.gpu_memory"), std::string::npos) << e.what();
  }

  // Under params nothing is resident until asked for; make_resident swaps whole models.
  options.policy = OffloadPolicy::params;
  offload::ChunkedEngine shared(options);
  CausalLM policy2(shape), reference2(shape);
  init_model_weights(*policy2, shape, 0.02, 1);
  init_model_weights(*reference2, shape, 0.02, 2);
  shared.add_model("policy", offload::group_parameters(*policy2, false), true);
  shared.add_model("reference", offload::group_parameters(*reference2, false), false);
  EXPECT_EQ(shared.resident_chunk_count("policy"), 0);
  shared.make_resident({"reference"});
  EXPECT_EQ(shared.resident_chunk_count("reference"), shared.chunk_count("reference"));
  EXPECT_EQ(shared.resident_chunk_count("policy"), 0);
  EXPECT_EQ((reference2->forward(ids) - reference_logits).abs().max().item<double>(), 0.0);
  shared.make_resident({"policy"});
  EXPECT_EQ(shared.resident_chunk_count("reference"), 0);
  EXPECT_EQ((policy2->forward(ids) - policy_logits).abs().max().item<double>(), 0.0);
  EXPECT_LE(shared.accountant().peak(offload::MemoryTier::device), options.device_budget);
  EXPECT_THROW(shared.make_resident({"policy", "reference"}), ConfigError);
  shared.make_resident({"reference"});  // the failed call left nothing half-done that blocks this
  EXPECT_EQ((reference2->forward(ids) - reference_logits).abs().max().item<double>(), 0.0);
  EXPECT_THROW(shared.make_resident({"critic"}), InternalError);
}

}  // namespace
}  // namespace ferry
