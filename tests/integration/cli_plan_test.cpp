// `ferry plan` as a user runs it: the demo model's plan, a Llama-7B-shaped model on 8 GiB (no room
// under `none`, a plan with offloading under `auto`), a 1 GiB budget that explains itself, and
// the exit codes for budgets and configs that cannot work; offload.overlap_step's shorter
// optimizer estimate.
#include <gtest/gtest.h>

#include "tests/integration/ferry_process.h"
#include "tests/support/scratch_dir.h"
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

// A Llama-2-7B-shaped model folder (config.json only: the plan needs no weights) and a run config.
std::string write_llama7b_config() {
  const auto dir = ferry::test_support::process_scratch_dir("ferry_plan_test");
  std::filesystem::create_directories(dir / "llama7b");
  std::ofstream(dir / "llama7b" / "config.json") << R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
  "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";
  std::ofstream(dir / "llama7b.yaml") << "model:\n  path: " << (dir / "llama7b").string()
                                      << "\ndata:\n  max_length: 1024\ntrain:\n  precision: bf16\n"
                                         "  micro_batch_size: 4\n  grad_accumulation: 2\noffload:\n  policy: auto\n"
                                         "  host_memory: 256GiB\n";  // a workstation's host, not this machine's
  return (dir / "llama7b.yaml").string();
}

// A model folder holding only `config_json` (the plan needs no weights); returns the folder.
std::string write_model_folder(const std::string& name, const std::string& config_json) {
  const auto dir = ferry::test_support::process_scratch_dir("ferry_plan_test") / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config_json;
  return dir.string();
}

// A TinyLlama-1.1B-shaped model folder (GQA: 4 key/value heads).
std::string write_tinyllama_folder() {
  return write_model_folder("tinyllama", R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
  "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
  "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048,
  "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})");
}

// A Llama-3-8B-shaped model folder (GQA 8 kv heads, 128k vocabulary).
std::string write_llama3_8b_folder() {
  return write_model_folder("llama3-8b", R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
})");
}

TEST(CliPlan, DemoModel) {
  const Result r = run_ferry("plan --config configs/demo-sft.yaml --gpu-memory 4GiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 2000*128 embedding + head = 512000; 4 layers of 4*128^2 + 3*128*352 + 2*128 = 200960; + 128.
  EXPECT_CONTAINS(r.output, "4 layers");
  EXPECT_CONTAINS(r.output, "1.32 M parameters");
  EXPECT_CONTAINS(r.output, "device budget: 4.00 GiB (--gpu-memory)");
  EXPECT_CONTAINS(r.output, "plan: policy none (as configured)");
  EXPECT_CONTAINS(r.output, "tokens/s");
  EXPECT_CONTAINS(r.output, "activations");
  EXPECT_CONTAINS(r.output, "assumptions:");
  EXPECT_CONTAINS(r.output, "not measured");
}

TEST(CliPlan, NoBudgetSaysWhatItAssumed) {
  const Result r = run_ferry("plan --config configs/demo-sft.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "offload.gpu_memory is 0");
}

TEST(CliPlan, SevenBillionDoesNotFitEightGibUnderNone) {
  const std::string config = write_llama7b_config();
  const Result r = run_ferry("plan --config " + config + " --set offload.policy=none --gpu-memory 8GiB");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "6.74 B parameters");
  EXPECT_CONTAINS(r.output, "no plan fits a device budget of 8.00 GiB");
  EXPECT_CONTAINS(r.output, "offload.policy auto");  // the suggestion that works
}

TEST(CliPlan, SevenBillionFitsEightGibWithOffloading) {
  const std::string config = write_llama7b_config();
  const Result r = run_ferry("plan --config " + config + " --gpu-memory 8GiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "chosen by offload.policy auto");
  const bool offloads = r.output.find("plan: policy params") != std::string::npos ||
                        r.output.find("plan: policy optimizer") != std::string::npos;
  EXPECT_TRUE(offloads) << r.output;
  EXPECT_CONTAINS(r.output, "paged from the host");
  EXPECT_CONTAINS(r.output, "(device budget 8.00 GiB, host budget 256.00 GiB)");
  EXPECT_CONTAINS(r.output, "estimated step:");
}

// 7B in bf16 under `params` needs ~113 GiB of host memory in one process (fp32 master weights,
// moments and accumulated gradients); one of 4 ZeRO processes holds a quarter of the master
// weights and moments (~57 GiB), so it fits a 64 GiB host.
TEST(CliPlan, ZeroShardsFitWhereOneProcessDoesNot) {
  const std::string args = "plan --config " + write_llama7b_config() +
                           " --set offload.policy=params --set offload.host_memory=64GiB --gpu-memory 8GiB";
  const Result alone = run_ferry(args);
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  const Result stage0 = run_ferry(args + " --nproc 4");
  EXPECT_EQ(stage0.exit_code, 2) << stage0.output;  // every process holds everything
  EXPECT_CONTAINS(stage0.output, "each holds everything");
  const Result sharded = run_ferry(args + " --nproc 4 --set distributed.zero_stage=1");
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  EXPECT_CONTAINS(sharded.output, "data parallel: 4 processes, distributed.zero_stage 1");
}

// The optimizer's share of the estimated step, in seconds ("optimizer 1.23 s" / "850.0 ms").
double optimizer_seconds(const std::string& output) {
  const size_t at = output.find(", optimizer ");
  if (at == std::string::npos) return -1;
  double value = 0;
  char unit[8] = {};
  if (std::sscanf(output.c_str() + at, ", optimizer %lf %7s", &value, unit) != 2) return -1;
  const std::string u(unit);
  return u.rfind("us", 0) == 0 ? value * 1e-6 : u.rfind("ms", 0) == 0 ? value * 1e-3 : value;
}

TEST(CliPlan, OverlappedStepShortensTheOptimizersShare) {
  // 7B under optimizer on 40 GiB, no clipping: the CPU AdamW of 6.7 B parameters mostly hides
  // behind the last micro-batch's backward with offload.overlap_step.
  const std::string base = "plan --config " + write_llama7b_config() +
                           " --set offload.policy=optimizer --set train.max_grad_norm=0 --gpu-memory 40GiB";
  const Result plain = run_ferry(base);
  const Result overlapped = run_ferry(base + " --set offload.overlap_step=true");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(overlapped.exit_code, 0) << overlapped.output;
  EXPECT_CONTAINS(overlapped.output, "offload.overlap_step");
  const double a = optimizer_seconds(plain.output), b = optimizer_seconds(overlapped.output);
  ASSERT_GT(a, 0) << plain.output;
  ASSERT_GT(b, 0) << overlapped.output;
  EXPECT_LT(b, 0.8 * a) << plain.output << "\n" << overlapped.output;
}

TEST(CliPlan, OneGibExplainsItself) {
  const std::string config = write_llama7b_config();
  const Result r = run_ferry("plan --config " + config + " --gpu-memory 1GiB");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "no plan fits a device budget of 1.00 GiB");
  EXPECT_CONTAINS(r.output, "the smallest device footprint is");
  EXPECT_CONTAINS(r.output, "buffers");
  EXPECT_CONTAINS(r.output, "what would make it fit");
  EXPECT_CONTAINS(r.output, "a device budget of at least");
}

TEST(CliPlan, BadInputsExitTwo) {
  Result r = run_ferry("plan --config configs/demo-sft.yaml --gpu-memory lots");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "--gpu-memory 'lots' is not a memory size");

  r = run_ferry("plan --config configs/demo-sft.yaml --set model.config= --set model.path=");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "model.path");

  r = run_ferry("plan --config configs/demo-sft.yaml --set model.config=/nonexistent/config.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "/nonexistent/config.json");
}

// --measure replaces the default CPU AdamW rate by this machine's (a GPU's rates too, when one is
// visible), and says so in the assumptions.
TEST(CliPlan, MeasureUsesThisMachinesRates) {
  const Result plain = run_ferry("plan --config configs/demo-sft.yaml --set offload.policy=auto --gpu-memory 4GiB");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_CONTAINS(plain.output, "CPU AdamW 1.00 G params/s (default, not measured");
  const Result measured =
      run_ferry("plan --config configs/demo-sft.yaml --set offload.policy=auto --gpu-memory 4GiB --measure");
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  EXPECT_CONTAINS(measured.output, "G params/s (measured here)");
}

// The GPU presets' comments state what the planner picks for these shapes; keep them honest.
// configs/laptop-7b.yaml: Llama-2-7B full fine-tuning fits an 8 GiB GPU and 32 GiB of host memory
// with the weights and the optimizer state on the NVMe tier, the step bound by the drive; 13B
// needs 64 GiB of host memory (the fp32 gradient sums) and ~49 GiB of the drive. Without
// offload.nvme_dir the preset is a config error naming it.
TEST(CliPlan, LaptopPresetFitsSevenBillionOnThreeTiers) {
  const std::string llama7b = std::filesystem::path(write_llama7b_config()).parent_path() / "llama7b";
  const std::string base = "plan --config configs/laptop-7b.yaml --set offload.nvme_dir=/tmp --set model.path=";
  const Result seven = run_ferry(base + llama7b);
  ASSERT_EQ(seven.exit_code, 0) << seven.output;
  EXPECT_CONTAINS(seven.output, "  total           7.77 GiB     27.09 GiB     25.30 GiB   (device budget 8.00 GiB, host budget 32.00 GiB)");
  EXPECT_CONTAINS(seven.output, "estimated step: 64.45 s");
  EXPECT_CONTAINS(seven.output, "bound by: NVMe (busy per step: compute 21.98 s");
  EXPECT_CONTAINS(seven.output, "NVMe read 2.50 GB/s, write 1.50 GB/s (default, not measured");
  const Result no_dir = run_ferry("plan --config configs/laptop-7b.yaml --set model.path=" + llama7b);
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.output;
  EXPECT_CONTAINS(no_dir.output, "needs offload.nvme_dir");

  const auto dir = ferry::test_support::process_scratch_dir("ferry_plan_test") / "llama13b";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
  "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
  "num_attention_heads": 40, "num_key_value_heads": 40, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";
  const Result thirteen_32 = run_ferry(base + dir.string());
  EXPECT_EQ(thirteen_32.exit_code, 2) << thirteen_32.output;
  EXPECT_CONTAINS(thirteen_32.output, "the smallest host footprint of a plan that fits the device is 49.72 GiB");
  const Result thirteen = run_ferry(base + dir.string() + " --set offload.host_memory=64GiB");
  ASSERT_EQ(thirteen.exit_code, 0) << thirteen.output;
  EXPECT_CONTAINS(thirteen.output, "     51.28 GiB     48.87 GiB   (device budget 8.00 GiB, host budget 64.00 GiB)");
  EXPECT_CONTAINS(thirteen.output, "bound by: NVMe");
}

TEST(CliPlan, PresetsPlanWhatTheirCommentsSay) {
  write_llama7b_config();
  const std::string llama7b = (ferry::test_support::process_scratch_dir("ferry_plan_test") / "llama7b").string();
  const std::string tinyllama = write_tinyllama_folder();
  struct Case {
    const char* preset;
    std::string model;
    const char* policy;
    const char* budget;
  };
  for (const Case& c : {Case{"configs/8gb.yaml", tinyllama, "plan: policy optimizer", "(device budget 8.00 GiB,"},
                        Case{"configs/8gb.yaml", llama7b, "plan: policy params", "(device budget 8.00 GiB,"},
                        Case{"configs/16gb.yaml", tinyllama, "plan: policy optimizer", "(device budget 16.00 GiB,"},
                        Case{"configs/16gb.yaml", llama7b, "plan: policy optimizer", "(device budget 16.00 GiB,"},
                        Case{"configs/24gb.yaml", tinyllama, "plan: policy none", "(device budget 24.00 GiB,"},
                        Case{"configs/24gb.yaml", llama7b, "plan: policy optimizer", "(device budget 24.00 GiB,"}}) {
    // A host as big as the presets' comments assume (not this machine's).
    const Result r = run_ferry(std::string("plan --config ") + c.preset + " --set model.path=" + c.model +
                               " --set offload.host_memory=256GiB");
    ASSERT_EQ(r.exit_code, 0) << c.preset << " " << c.model << "\n" << r.output;
    EXPECT_CONTAINS(r.output, c.policy);
    EXPECT_CONTAINS(r.output, c.budget);
    EXPECT_CONTAINS(r.output, "host budget 256.00 GiB)");
  }
  // Llama-2-7B at 8 GiB GPU + 32 GiB host: the host cannot hold full fine-tuning's optimizer state,
  // whatever its format; the error names offload.host_memory, the largest model that fits, LoRA.
  const Result host = run_ferry("plan --config configs/8gb.yaml --set model.path=" + llama7b +
                                " --set offload.host_memory=32GiB");
  EXPECT_EQ(host.exit_code, 2) << host.output;
  EXPECT_CONTAINS(host.output, "no plan fits the host budget of 32.00 GiB (offload.host_memory)");
  EXPECT_CONTAINS(host.output, "the largest model that would fit");
  EXPECT_CONTAINS(host.output, "bf16+Kahan master, int8 moments");
  EXPECT_CONTAINS(host.output, "lora.rank 8");
  EXPECT_CONTAINS(host.output, "bf16 stochastic,   int8 moments");
  // The optimizer state on the NVMe tier leaves the bf16 weights, the fp32 gradient sums and the
  // staging ring on the host (38.64 GiB, still over 32 GiB); at 48 GiB it fits, with the state in an
  // nvme column.
  const std::string nvme = "plan --config configs/8gb.yaml --set model.path=" + llama7b +
                           " --set offload.optimizer_state_tier=nvme --set offload.nvme_dir=/tmp"
                           " --set offload.optimizer_state=int8 --set offload.master_weights=bf16_stochastic";
  const Result nvme_32 = run_ferry(nvme + " --set offload.host_memory=32GiB");
  EXPECT_EQ(nvme_32.exit_code, 2) << nvme_32.output;
  EXPECT_CONTAINS(nvme_32.output, "the smallest host footprint of a plan that fits the device is 38.64 GiB");
  const Result nvme_48 = run_ferry(nvme + " --set offload.host_memory=48GiB");
  ASSERT_EQ(nvme_48.exit_code, 0) << nvme_48.output;
  EXPECT_CONTAINS(nvme_48.output, "device          host          nvme");
  EXPECT_CONTAINS(nvme_48.output, "moments");
  const Result lora = run_ferry("plan --config configs/8gb.yaml --set model.path=" + llama7b +
                                " --set offload.host_memory=32GiB --set lora.rank=8");
  EXPECT_EQ(lora.exit_code, 0) << lora.output;
  // Llama-3-8B, LoRA rank 16, 1024 tokens, 8 GiB GPU and 16 GiB host. With a bf16 base the GPU
  // cannot hold the 16 GB of weights: they page from the host, which then holds 15.19 GiB, and
  // 12 GiB of host is too little (the planner names QLoRA as the way out). With the base in NF4 the
  // whole model stays on the GPU and the host holds the adapters' optimizer state.
  const std::string llama3 = write_llama3_8b_folder();
  const std::string qlora_args = "plan --config configs/8gb.yaml --set model.path=" + llama3 + " --set lora.rank=16";
  const Result bf16_base = run_ferry(qlora_args + " --set offload.host_memory=16GiB");
  ASSERT_EQ(bf16_base.exit_code, 0) << bf16_base.output;
  EXPECT_CONTAINS(bf16_base.output, "plan: policy params");
  const Result small_host = run_ferry(qlora_args + " --set offload.host_memory=12GiB");
  EXPECT_EQ(small_host.exit_code, 2) << small_host.output;
  EXPECT_CONTAINS(small_host.output, "QLoRA: the frozen base in 4 bits, lora.quantize_base nf4 (host footprint then");
  const Result qlora = run_ferry(qlora_args + " --set offload.host_memory=16GiB --set lora.quantize_base=nf4");
  ASSERT_EQ(qlora.exit_code, 0) << qlora.output;
  EXPECT_CONTAINS(qlora.output, "plan: policy optimizer");
  EXPECT_CONTAINS(qlora.output, "base: the decoder projections in 4-bit NF4 (lora.quantize_base, double-quantised "
                                "scales): 6.98 B weights in 3.35 GiB (0.516 byte each)");
  EXPECT_CONTAINS(qlora.output, "buffer of up to 112.00 MiB");
  EXPECT_CONTAINS(qlora.output, "(device budget 8.00 GiB, host budget 16.00 GiB)");
  std::cout << qlora.output;
  // Without offloading, TinyLlama does not fit the 8 GiB preset (16 B/param is 17.6 GB).
  const Result none = run_ferry("plan --config configs/8gb.yaml --set offload.policy=none --set model.path=" + tinyllama);
  EXPECT_EQ(none.exit_code, 2) << none.output;
}

}  // namespace
