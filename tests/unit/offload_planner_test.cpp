// The `auto` planner: never over budget, never slower with more budget, deterministic, fast; an
// impossible budget is explained with the smallest footprint; and the cost model's compute term
// checked against 6 * params * tokens written out by hand.
#include <gtest/gtest.h>

#include <chrono>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/planner.h"

namespace ferry::offload {
namespace {

constexpr uint64_t GiB = 1ull << 30;

PlannerRates rates_with_tflops(double tflops) {
  PlannerRates rates;
  rates.device_tflops = tflops;
  return rates;
}

PlannerRates rates_with_pcie(double gbps) {
  PlannerRates rates;
  rates.pcie_gbps = gbps;
  return rates;
}

PlannerRequest llama7b_request(uint64_t budget) {
  PlannerRequest r;
  r.shape.model = ModelShape{};  // Llama-2-7B's shape: hidden 4096, 32 layers, MLP 11008, vocab 32000
  r.shape.precision = Precision::bf16;
  r.shape.seq_len = 1024;
  r.shape.grad_accumulation = 2;
  r.micro_batch_size = 4;
  r.device_budget = budget;
  return r;
}

PlannerRequest llama1b_request(uint64_t budget) {
  PlannerRequest r = llama7b_request(budget);
  r.shape.model.hidden_size = 2048;
  r.shape.model.intermediate_size = 5632;
  r.shape.model.num_hidden_layers = 22;
  r.shape.model.num_attention_heads = 32;
  r.shape.model.num_key_value_heads = 4;
  r.shape.model.head_dim = 64;
  return r;
}

TEST(Planner, NeverOverBudgetAndNeverSlowerWithMoreBudget) {
  for (auto make : {llama1b_request, llama7b_request}) {
    double previous_time = 0;
    bool found_any = false;
    for (uint64_t budget = 2 * GiB; budget <= 160 * GiB; budget += GiB) {
      const PlanResult result = plan(make(budget));
      if (!result.best) {
        EXPECT_FALSE(found_any) << "a smaller budget had a plan but " << budget / GiB << " GiB has none";
        EXPECT_GT(result.smallest.memory.device_total(), budget);
        continue;
      }
      const Plan& p = *result.best;
      EXPECT_LE(p.memory.device_total(), budget) << budget / GiB << " GiB";
      if (found_any) {
        EXPECT_LE(p.time.total_s(), previous_time) << budget / GiB << " GiB";
      }
      EXPECT_EQ(p.choice.micro_batch_size * p.grad_accumulation, 8);  // the global batch is kept
      previous_time = p.time.total_s();
      found_any = true;
    }
    EXPECT_TRUE(found_any);
  }
}

TEST(Planner, SevenBillionNeedsOffloadingOnEightGib) {
  // 16 bytes per parameter under `none`: 6.74e9 * 16 = 108 GB, far over 8 GiB.
  PlannerRequest none_only = llama7b_request(8 * GiB);
  none_only.policies = {OffloadPolicy::none};
  const PlanResult none = plan(none_only);
  EXPECT_FALSE(none.best);
  EXPECT_GE(none.smallest.memory.device_total(), 16ull * 6738415616ull);

  const PlanResult automatic = plan(llama7b_request(8 * GiB));
  ASSERT_TRUE(automatic.best);
  EXPECT_EQ(automatic.best->choice.policy, OffloadPolicy::params);  // 2 B/param of weights alone is 13.5 GB
  EXPECT_LE(automatic.best->memory.device_total(), 8 * GiB);

  // With room for everything, nothing is offloaded: `none` is the fastest.
  const PlanResult roomy = plan(llama7b_request(200 * GiB));
  ASSERT_TRUE(roomy.best);
  EXPECT_EQ(roomy.best->choice.policy, OffloadPolicy::none);
  EXPECT_EQ(roomy.best->checkpointed_layers(), 0);
}

TEST(Planner, ImpossibleBudgetExplainsTheSmallestFootprint) {
  const PlannerRequest request = llama7b_request(1 * GiB);
  const PlanResult result = plan(request);
  ASSERT_FALSE(result.best);
  const uint64_t smallest = result.smallest.memory.device_total();
  EXPECT_GT(smallest, 1 * GiB);
  EXPECT_EQ(result.smallest.choice.policy, OffloadPolicy::params);
  EXPECT_EQ(result.smallest.choice.micro_batch_size, 1);
  EXPECT_EQ(result.smallest.checkpointed_layers(), 32);
  ASSERT_FALSE(result.suggestions.empty());
  EXPECT_NE(result.suggestions[0].find("at least " + format_bytes_approx(smallest)), std::string::npos);
  const std::string text = explain_no_fit(request, result);
  EXPECT_NE(text.find("no plan fits a device budget of 1.00 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("smallest device footprint is " + format_bytes_approx(smallest)), std::string::npos) << text;
  EXPECT_NE(text.find("activations"), std::string::npos) << text;
  EXPECT_NE(text.find("what would make it fit"), std::string::npos) << text;
}

TEST(Planner, SuggestsShorterSequencesWhenActivationsAreTheProblem) {
  // A 1B model at 16k tokens: with all the logits at once (a 32k vocabulary: 2 GiB per fp32
  // copy) nothing fits 6 GiB; the chunked LM head (train.logits_chunk -1) makes it fit.
  PlannerRequest request = llama1b_request(6 * GiB);
  request.shape.seq_len = 16384;
  request.shape.logits_chunk = 0;
  EXPECT_FALSE(plan(request).best);
  request.shape.logits_chunk = -1;
  EXPECT_TRUE(plan(request).best);
  // At 64k tokens the checkpointed layer inputs alone are too much; a shorter max_length fits.
  request.shape.seq_len = 65536;
  const PlanResult result = plan(request);
  ASSERT_FALSE(result.best);
  bool suggests_length = false;
  for (const auto& line : result.suggestions) suggests_length |= line.find("data.max_length") != std::string::npos;
  EXPECT_TRUE(suggests_length) << explain_no_fit(request, result);
}

// Llama-2-7B at an 8 GiB GPU and 32 GiB of host memory: full fine-tuning fits the device (paging)
// but not the host, at any optimizer-state format; the error names offload.host_memory and the
// largest model that would fit; LoRA fits both.
TEST(Planner, HostBudgetRejectsWhatTheHostCannotHold) {
  PlannerRequest request = llama7b_request(8 * GiB);
  const PlanResult unlimited = plan(request);
  ASSERT_TRUE(unlimited.best);
  EXPECT_GT(unlimited.best->memory.host_total(), 100 * GiB);  // ~18 B/param: bf16 weights, fp32 master, moments, sums

  request.host_budget = 32 * GiB;
  const PlanResult result = plan(request);
  EXPECT_FALSE(result.best);
  ASSERT_TRUE(result.smallest_host);
  EXPECT_LE(result.smallest_host->memory.device_total(), 8 * GiB);
  const MemoryModel model(request.shape, request.constants);
  const int64_t largest = largest_model_for_host(model, *result.smallest_host, request.host_budget);
  // 32 GiB at the plan's bytes per parameter: a model of about 2 B parameters.
  const double per_param = static_cast<double>(result.smallest_host->memory.host_total()) / model.base_parameters();
  EXPECT_NEAR(static_cast<double>(largest), 32.0 * GiB / per_param, 1e3);
  EXPECT_GT(largest, 1'500'000'000);
  EXPECT_LT(largest, 2'500'000'000);
  const std::string text = explain_no_fit(request, result);
  EXPECT_NE(text.find("offload.host_memory"), std::string::npos) << text;
  EXPECT_NE(text.find("largest model that would fit"), std::string::npos) << text;
  EXPECT_NE(text.find("lora.rank 8"), std::string::npos) << text;
  EXPECT_NE(text.find("int8 moments"), std::string::npos) << text;

  // The cost model's optimizer-state formats for that plan: 8-bit moments save 6 B/param (8 -> 2 +
  // an fp32 scale per 256), bf16 + Kahan master weights 2 more (4 -> a 2-byte compensation).
  const uint64_t trainable = static_cast<uint64_t>(model.trainable_parameters());
  auto host_with = [&](MomentFormat moments, MasterFormat master) {
    TrainingShape shape = request.shape;
    shape.moments = moments;
    shape.master = master;
    shape.grad_accumulation = result.smallest_host->grad_accumulation;
    return MemoryModel(shape, request.constants).estimate(result.smallest_host->choice).host_total();
  };
  const uint64_t fp32 = host_with(MomentFormat::fp32, MasterFormat::fp32);
  const uint64_t int8 = host_with(MomentFormat::int8, MasterFormat::fp32);
  const uint64_t kahan = host_with(MomentFormat::int8, MasterFormat::bf16_kahan);
  EXPECT_EQ(fp32, result.smallest_host->memory.host_total());
  EXPECT_EQ(fp32 - int8, 6 * trainable - 8 * ((trainable + 255) / 256));
  EXPECT_EQ(int8 - kahan, 2 * trainable);
  EXPECT_GT(kahan, 32 * GiB);  // still over: 7B full fine-tuning needs more than 32 GiB of host memory

  // LoRA holds only the adapters' state: it fits both budgets.
  request.shape.lora_rank = 8;
  EXPECT_TRUE(plan(request).best);
}

TEST(Planner, ParamsAlwaysCheckpointsEveryLayer) {
  // The runtime engine re-runs a paged group's forward in backward (offload/engine.h).
  for (uint64_t budget : {4 * GiB, 8 * GiB, 24 * GiB}) {
    const PlanResult result = plan(llama7b_request(budget));
    ASSERT_TRUE(result.best);
    if (budget == 4 * GiB) {
      EXPECT_EQ(result.best->choice.policy, OffloadPolicy::params);  // bf16 weights alone are 12.6 GiB
    }
    if (result.best->choice.policy == OffloadPolicy::params) {
      EXPECT_EQ(result.best->checkpointed_layers(), 32);
    }
  }
}

TEST(Planner, DeterministicAndFast) {
  const PlannerRequest request = llama7b_request(8 * GiB);
  const auto start = std::chrono::steady_clock::now();
  const PlanResult a = plan(request);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const PlanResult b = plan(request);
  ASSERT_TRUE(a.best && b.best);
  EXPECT_EQ(a.best->choice.policy, b.best->choice.policy);
  EXPECT_EQ(a.best->choice.chunk_on_device, b.best->choice.chunk_on_device);
  EXPECT_EQ(a.best->choice.layer_checkpointed, b.best->choice.layer_checkpointed);
  EXPECT_EQ(a.best->time.total_s(), b.best->time.total_s());
  // Micro-batches 1, 2, 4 (global batch 8) x (none: 0..32 checkpointed layers, 1..32 of them
  // also with activation offload; optimizer: the same; params: every layer checkpointed, with and
  // without offload, with 0..34 of the 34 chunks kept).
  EXPECT_EQ(a.candidates, 3 * (65 + 65 + 2 * 35));
  EXPECT_LT(ms, 1000.0) << "the search should take milliseconds";
}

TEST(Planner, OffloadsActivationsOnlyWhenThatIsWhatFits) {
  // A 1B model at 16k tokens: 22 checkpointed inputs of 64 MiB each are most of the activations.
  PlannerRequest request = llama1b_request(80 * GiB);
  request.shape.seq_len = 16384;
  request.micro_batch_size = 1;
  request.shape.grad_accumulation = 1;
  PlannerRequest without = request;
  without.search_activation_offload = false;
  const uint64_t smallest_without = smallest_footprint(without).memory.device_total();
  const Plan smallest_with = smallest_footprint(request);
  EXPECT_TRUE(smallest_with.choice.activation_offload);
  // Twenty of the 22 inputs (2 x 16384 x 2048 bytes each) leave the device.
  EXPECT_EQ(smallest_without - smallest_with.memory.device_total(), 20ull * 16384 * 2048 * 2);
  EXPECT_EQ(smallest_with.memory.bytes.at(MemoryTier::host, MemoryCategory::activations), 22ull * 16384 * 2048 * 2);
  EXPECT_NE(smallest_with.describe_checkpointing().find("inputs offloaded to host memory"), std::string::npos);

  // A budget between the two: only offloading fits.
  request.device_budget = without.device_budget = smallest_without - 1;
  EXPECT_FALSE(plan(without).best);
  const PlanResult tight = plan(request);
  ASSERT_TRUE(tight.best);
  EXPECT_TRUE(tight.best->choice.activation_offload);
  EXPECT_LE(tight.best->memory.device_total(), request.device_budget);
  // Plenty of budget: the copies are not worth their cost.
  request.device_budget = 80 * GiB;
  ASSERT_TRUE(plan(request).best);
  EXPECT_FALSE(plan(request).best->choice.activation_offload);
  // train.activation_offload true forces it.
  request.activation_offload = true;
  ASSERT_TRUE(plan(request).best);
  EXPECT_TRUE(plan(request).best->choice.activation_offload);
}

TEST(PlannerCost, OffloadedActivationsCrossPcieBothWays) {
  PlannerRequest request = llama1b_request(80 * GiB);
  const MemoryModel model(request.shape, request.constants);
  const ResolvedRates rates = resolve_rates(rates_with_pcie(12), request.shape.precision);
  PlacementChoice kept;
  kept.policy = OffloadPolicy::optimizer;
  kept.micro_batch_size = 4;
  kept.layer_checkpointed.assign(22, true);
  PlacementChoice offloaded = kept;
  offloaded.activation_offload = true;
  const StepTimeEstimate a = estimate_step_time(model, kept, 2, rates);
  const StepTimeEstimate b = estimate_step_time(model, offloaded, 2, rates);
  // 22 layers x 2 micro-batches x 4 x 1024 tokens x 2048 x 2 bytes, each way.
  const uint64_t bytes = 22ull * 2 * 4 * 1024 * 2048 * 2;
  EXPECT_EQ(b.device_to_host_bytes - a.device_to_host_bytes, bytes);
  EXPECT_EQ(b.host_to_device_bytes - a.host_to_device_bytes, bytes);
  EXPECT_GT(b.total_s(), a.total_s());
}

TEST(Planner, FixedPolicySearchesNothingElse) {
  PlannerRequest request = llama1b_request(80 * GiB);
  request.policies = {OffloadPolicy::optimizer};
  request.search_micro_batch = request.search_checkpointing = request.search_kept_chunks = false;
  request.search_activation_offload = false;
  request.gradient_checkpointing = true;
  const PlanResult result = plan(request);
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.candidates, 1);
  EXPECT_FALSE(result.best->choice.activation_offload);
  EXPECT_EQ(result.best->choice.policy, OffloadPolicy::optimizer);
  EXPECT_EQ(result.best->choice.micro_batch_size, 4);
  EXPECT_EQ(result.best->checkpointed_layers(), 22);
}

// Two layers of hidden 64 (MLP 128, 4 heads of 16), vocabulary 100, 8-token sequences: small
// enough to count every FLOP and parameter by hand.
TrainingShape tiny_shape() {
  TrainingShape shape;
  shape.model.vocab_size = 100;
  shape.model.hidden_size = 64;
  shape.model.intermediate_size = 128;
  shape.model.num_hidden_layers = 2;
  shape.model.num_attention_heads = 4;
  shape.model.num_key_value_heads = 4;
  shape.model.head_dim = 16;
  shape.seq_len = 8;
  return shape;
}

TEST(PlannerCost, ComputeIsSixFlopsPerParameterPerToken) {
  // Tiny model under `none`: compute = tokens * (6 * matmul params + 6 * layers * T * heads *
  // head_dim (causal attention, forward + backward)) / FLOP rate. Matmul params exclude the
  // embedding (a gather) and the norms.
  TrainingShape shape = tiny_shape();
  const MemoryModel model(shape);
  PlacementChoice choice;
  choice.policy = OffloadPolicy::none;
  choice.micro_batch_size = 2;
  ResolvedRates rates = resolve_rates(rates_with_tflops(1.0), Precision::bf16);
  const double matmul_params = 2 * (4 * 64 * 64 + 3 * 64 * 128) + 100 * 64;  // layers + LM head = 88064
  const double tokens = 16;
  const double expected = tokens * (6 * matmul_params + 6.0 * 2 * 8 * 4 * 16) / 1e12;
  const StepTimeEstimate t = estimate_step_time(model, choice, 1, rates);
  EXPECT_NEAR(t.compute_s, expected, expected * 1e-12);
  // Checkpointing both layers adds their forward again: 2 * (2 * layer matmul + attention).
  choice.layer_checkpointed = {true, true};
  const double recompute = tokens * 2 * (2.0 * (4 * 64 * 64 + 3 * 64 * 128) + 2.0 * 8 * 4 * 16) / 1e12;
  EXPECT_NEAR(estimate_step_time(model, choice, 1, rates).compute_s, expected + recompute, expected * 1e-12);
  // The CPU optimizer at its rate: P / rate.
  choice.policy = OffloadPolicy::optimizer;
  rates.cpu_adam_params_per_s = 1e6;
  rates.pcie_bytes_per_s = 1e15;  // transfers free
  EXPECT_NEAR(estimate_step_time(model, choice, 1, rates).optimizer_s, 95040 / 1e6, 1e-6);
}

TEST(PlannerCost, OverlappedStepHidesAllButTheEmbeddingsUpdateBehindBackward) {
  // The tiny model of the test above under `optimizer`, CPU AdamW at 1e6 params/s, free transfers:
  // 95040 parameters, 6400 of them in the embedding's chunk (vocab 100 x 64), which backward
  // reaches last.
  TrainingShape shape = tiny_shape();
  shape.overlap_step = true;
  const MemoryModel model(shape);
  PlacementChoice choice;
  choice.policy = OffloadPolicy::optimizer;
  choice.micro_batch_size = 2;
  ResolvedRates rates = resolve_rates(rates_with_tflops(1.0), Precision::bf16);
  rates.cpu_adam_params_per_s = 1e6;
  rates.pcie_bytes_per_s = 1e15;
  // A slow device: backward outlasts every update but the embedding's.
  rates.device_flops = 1e6;
  EXPECT_NEAR(estimate_step_time(model, choice, 2, rates).optimizer_s, 6400 / 1e6, 1e-9);
  // A fast one: backward hides only its own length of the update.
  rates.device_flops = 1e15;
  const StepTimeEstimate fast = estimate_step_time(model, choice, 2, rates);
  EXPECT_NEAR(fast.optimizer_s, 95040 / 1e6 - fast.backward_s / 2, 1e-9);
  shape.overlap_step = false;
  EXPECT_NEAR(estimate_step_time(MemoryModel(shape), choice, 2, rates).optimizer_s, 95040 / 1e6, 1e-9);
}

// offload.optimizer_state_tier nvme: the master and moment bytes move from the host to the nvme
// tier (the host keeps the staging ring), and the optimizer step is the slower of the CPU AdamW and
// reading + writing the state at the disk's rates; the busiest resource bounds the step.
TEST(PlannerCost, NvmeStateMovesItsBytesAndCostsReadPlusWrite) {
  TrainingShape shape = tiny_shape();  // bf16, 95040 trainable parameters
  PlacementChoice choice;
  choice.policy = OffloadPolicy::optimizer;
  choice.micro_batch_size = 2;
  const MemoryEstimate host = MemoryModel(shape).estimate(choice);
  shape.state_on_nvme = true;
  const MemoryModel model(shape);
  const MemoryEstimate nvme = model.estimate(choice);
  const uint64_t n = 95040;
  EXPECT_EQ(nvme.bytes.at(MemoryTier::nvme, MemoryCategory::master), 4 * n);
  EXPECT_EQ(nvme.bytes.at(MemoryTier::nvme, MemoryCategory::moments), 8 * n);
  EXPECT_EQ(nvme.bytes.at(MemoryTier::host, MemoryCategory::master), 0u);
  EXPECT_EQ(nvme.bytes.at(MemoryTier::host, MemoryCategory::moments), 4 * 12 * n);  // the ring: 4 windows (n < 2^20)
  EXPECT_EQ(host.host_total() - host.bytes.at(MemoryTier::host, MemoryCategory::master) -
                host.bytes.at(MemoryTier::host, MemoryCategory::moments),
            nvme.host_total() - 4 * 12 * n);  // nothing else moved

  ResolvedRates rates = resolve_rates(rates_with_tflops(1.0), Precision::bf16, true);
  EXPECT_NE(rates.lines.back().find("NVMe read 2.50 GB/s, write 1.50 GB/s (default, not measured"),
            std::string::npos) << rates.lines.back();
  rates.cpu_adam_params_per_s = 1e9;
  rates.pcie_bytes_per_s = 1e15;
  rates.device_flops = 1e15;
  rates.nvme_read_bytes_per_s = 1e6;  // a slow disk: 12 n bytes read, then written
  rates.nvme_write_bytes_per_s = 0.5e6;
  const StepTimeEstimate slow = estimate_step_time(model, choice, 1, rates);
  EXPECT_NEAR(slow.nvme_s, 12.0 * n / 1e6 + 12.0 * n / 0.5e6, 1e-9);
  EXPECT_NEAR(slow.optimizer_s, slow.nvme_s, 1e-6);
  EXPECT_EQ(slow.nvme_bytes, 24 * n);
  EXPECT_EQ(slow.bound, "NVMe");
  rates.nvme_read_bytes_per_s = rates.nvme_write_bytes_per_s = 1e15;  // a fast one: the CPU AdamW
  rates.cpu_adam_params_per_s = 1e3;
  const StepTimeEstimate fast = estimate_step_time(model, choice, 1, rates);
  EXPECT_NEAR(fast.optimizer_s, n / 1e3, 1e-6);
  EXPECT_EQ(fast.bound, "CPU AdamW");
  EXPECT_EQ(estimate_step_time(MemoryModel(tiny_shape()), choice, 1, rates).nvme_bytes, 0u);
  // The weights there too (offload.params_tier nvme): their host bytes move, and the step reads and
  // rewrites the bf16 weights as well (under `optimizer` nothing is paged from the drive).
  shape.weights_on_nvme = true;
  const MemoryModel both(shape);
  const MemoryEstimate moved = both.estimate(choice);
  EXPECT_EQ(moved.bytes.at(MemoryTier::host, MemoryCategory::weights), 0u);
  EXPECT_EQ(moved.bytes.at(MemoryTier::nvme, MemoryCategory::weights), nvme.bytes.at(MemoryTier::host, MemoryCategory::weights));
  rates.nvme_read_bytes_per_s = 1e6;
  rates.nvme_write_bytes_per_s = 0.5e6;
  const StepTimeEstimate with_weights = estimate_step_time(both, choice, 1, rates);
  EXPECT_EQ(with_weights.nvme_bytes, 28 * n);
  EXPECT_NEAR(with_weights.nvme_s, 14.0 * n / 1e6 + 14.0 * n / 0.5e6, 1e-9);
}

TEST(PlannerCost, DefaultRatesAreLabelledAsNotMeasured) {
  const ResolvedRates defaults = resolve_rates(PlannerRates{}, Precision::bf16);
  EXPECT_DOUBLE_EQ(defaults.pcie_bytes_per_s, kDefaultPcieGbps * 1e9);
  ASSERT_FALSE(defaults.lines.empty());
  EXPECT_NE(defaults.lines[0].find("not measured"), std::string::npos) << defaults.lines[0];
  const ResolvedRates given = resolve_rates(rates_with_pcie(25), Precision::bf16);
  EXPECT_DOUBLE_EQ(given.pcie_bytes_per_s, 25e9);
  EXPECT_EQ(given.lines[0].find("not measured"), std::string::npos) << given.lines[0];
}

}  // namespace
}  // namespace ferry::offload
