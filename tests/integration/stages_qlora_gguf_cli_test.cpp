// `lora.quantize_base: gguf` through the CLI: train-sft with model.path a tiny GGUF file
// (tests/support/tiny_gguf_model.h: projections in Q4_1 and Q4_K) trains LoRA on the file's own
// blocks, its checkpoint holds them as ggml_checkpoint.h names them (`M.weight` uint8 blocks +
// `M.weight.ggml_type`), resuming from it continues, `ferry export` writes a full-precision folder
// Ferry loads again, train-dpo and train-grpo train LoRA on the same blocks, and gguf on a model
// that is not a GGUF file is refused with exit 2.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "src/io/ggml_types.h"
#include "src/io/hf_checkpoint.h"
#include "src/model/pretrained.h"
#include "tests/integration/ferry_process.h"
#include "tests/support/tiny_gguf_model.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using ferry_test::run_command;

// `ferry ARGS` from the source tree with its GGUF model folders prepared under `cache`.
ferry_test::CommandResult run_ferry_cached(const fs::path& cache, const std::string& args) {
  return run_command(std::string("cd '") + FERRY_SOURCE_DIR + "' && FERRY_CACHE='" + cache.string() + "' '" +
                     FERRY_BINARY + "' " + args);
}

std::string sft_args(const fs::path& model, const fs::path& out, int steps) {
  return "train-sft --config configs/demo-sft-qlora.yaml --set model.path=" + model.string() +
         " --set lora.quantize_base=gguf --set lora.export=merged --set output.dir=" + out.string() +
         " --set data.eval_file= --set data.prompt_file= --set data.max_samples=16 --set train.micro_batch_size=4"
         " --set train.max_steps=" + std::to_string(steps) + " --set train.save_every=2 --set train.eval_every=0" +
         ferry_test::kQuietCpu;
}

TEST(QloraGgufCli, TrainsResumesAndExports) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_qlora_gguf_cli");
  fs::remove_all(dir);
  const fs::path model = gguf_test::write_tiny_gguf(dir / "tiny.gguf", {io::GgmlType::q4_1, io::GgmlType::q4_k});
  const auto first = run_ferry_cached(dir / "cache", sft_args(model, dir / "run", 2));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_CONTAINS(first.output, "is a GGUF model: 14 projections kept in the file's blocks (7 Q4_1, 7 Q4_K)");
  EXPECT_CONTAINS(first.output, "QLoRA base: 14 projections");
  EXPECT_CONTAINS(first.output, "in the GGUF's ggml blocks: ");
  const io::TensorMap step = io::load_hf_weights(dir / "run" / "step-2");
  const std::string w = "model.layers.0.self_attn.k_proj.weight";  // Q4_K: 144 bytes per 256 weights
  ASSERT_EQ(step.count(w + ".ggml_type"), 1u);
  EXPECT_EQ(step.at(w + ".ggml_type").item<int32_t>(), static_cast<int32_t>(io::GgmlType::q4_k));
  EXPECT_EQ(step.at(w).scalar_type(), torch::kByte);
  EXPECT_EQ(step.at(w).sizes(), (c10::IntArrayRef{128, 144}));

  const auto resumed = run_ferry_cached(dir / "cache", sft_args(model, dir / "run", 4) + " --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  EXPECT_TRUE(fs::exists(dir / "run" / "step-4"));
  // The base is frozen: the resumed run's checkpoint holds the file's blocks unchanged.
  EXPECT_TRUE(torch::equal(io::load_hf_weights(dir / "run" / "step-4").at(w), step.at(w)));

  const auto exported = run_ferry_cached(
      dir / "cache", "export --checkpoint " + (dir / "run" / "step-4").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const io::TensorMap out = io::load_hf_weights(dir / "out");
  EXPECT_EQ(out.count(w + ".ggml_type"), 0u);
  EXPECT_EQ(out.at(w).scalar_type(), torch::kFloat);
  EXPECT_EQ(out.at(w).sizes(), (c10::IntArrayRef{128, 256}));
  CausalLM merged = causal_lm_from_pretrained(dir / "out");
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::isfinite(merged->forward(torch::tensor({{1, 5, 9}}))).all().item<bool>());
  // Back to GGUF: the blocks dequantised, the adapters folded in, written in f32.
  const auto gguf = run_ferry_cached(dir / "cache", "export --format gguf --gguf-type f32 --checkpoint " +
                                                        (dir / "run" / "step-4").string() + " --output " +
                                                        (dir / "merged.gguf").string());
  ASSERT_EQ(gguf.exit_code, 0) << gguf.output;
  EXPECT_TRUE(fs::exists(dir / "merged.gguf"));
  fs::remove_all(dir);
}

// DPO (reference: the base with the adapters off) and GRPO (sampling from the blocks, then
// learning on them) load the policy as SFT does: the checkpoint keeps the file's blocks.
TEST(QloraGgufCli, PreferenceAndRlStagesTrainOnTheBlocks) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_qlora_gguf_rl");
  fs::remove_all(dir);
  const fs::path model = gguf_test::write_tiny_gguf(dir / "tiny.gguf", {io::GgmlType::q4_0, io::GgmlType::q6_k});
  const std::string common = " --set model.path=" + model.string() +
                             " --set lora.rank=4 --set lora.alpha=8 --set lora.quantize_base=gguf"
                             " --set train.max_steps=2 --set train.save_every=2 --set train.eval_every=0"
                             " --set train.micro_batch_size=4 --set data.eval_file=" +
                             std::string(ferry_test::kQuietCpu);
  const std::string w = "model.layers.1.mlp.down_proj.weight";
  struct Stage {
    std::string name, checkpoint, args;  // checkpoint: the policy's folder in step-2
  };
  for (const Stage& stage :
       {Stage{"dpo", "step-2", "train-dpo --config configs/demo-dpo.yaml --set data.max_samples=8"},
        Stage{"grpo", "step-2/policy", "train-grpo --config configs/demo-grpo.yaml --set data.max_samples=4 --set grpo.num_generations=2"
                      " --set grpo.generation_batch_size=8 --set generation.max_new_tokens=4"}}) {
    SCOPED_TRACE(stage.name);
    const auto run = run_ferry_cached(dir / "cache", stage.args + common + " --set output.dir=" + (dir / stage.name).string());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_CONTAINS(run.output, "is a GGUF model: 14 projections kept in the file's blocks (7 Q4_0, 7 Q6_K)");
    const io::TensorMap step = io::load_hf_weights(dir / stage.name / stage.checkpoint);
    ASSERT_EQ(step.count(w + ".ggml_type"), 1u);
    EXPECT_EQ(step.at(w + ".ggml_type").item<int32_t>(), static_cast<int32_t>(io::GgmlType::q6_k));
    EXPECT_EQ(step.at(w).scalar_type(), torch::kByte);
    const auto adapters = std::count_if(step.begin(), step.end(), [](const auto& kv) {
      return kv.first.find("lora_A") != std::string::npos;
    });
    EXPECT_EQ(adapters, 8) << "one lora_A per adapted projection (lora.target_modules: q, k, v, o)";
  }
  fs::remove_all(dir);
}

TEST(QloraGgufCli, PlanCountsTheBlocksAsStored) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_qlora_gguf_plan");
  fs::remove_all(dir);
  const fs::path model = gguf_test::write_tiny_gguf(dir / "q4_1.gguf", {io::GgmlType::q4_1});
  const auto plan = run_ferry_cached(dir / "cache", "plan --config configs/demo-sft-qlora.yaml --set model.path=" +
                                                        model.string() + " --set lora.quantize_base=gguf --gpu-memory 8GiB");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_CONTAINS(plan.output, "base: the decoder projections in the GGUF's ggml blocks");
  EXPECT_CONTAINS(plan.output, "(0.625 byte each)");
  fs::remove_all(dir);
}

TEST(QloraGgufCli, AModelThatIsNotAGgufFileIsRefused) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_qlora_gguf_refuse");
  fs::remove_all(dir);
  const auto scratch = run_ferry_cached(dir / "cache", sft_args("x.gguf", dir / "a", 1) +
                                                           " --set model.path= --set model.config=configs/demo-model.json");
  EXPECT_EQ(scratch.exit_code, 2) << scratch.output;
  EXPECT_CONTAINS(scratch.output, "lora.quantize_base gguf");
  EXPECT_CONTAINS(scratch.output, "needs model.path");
  // A Hugging Face folder (this one from a short full-precision run) has no blocks to keep.
  const auto folder = run_ferry_cached(dir / "cache", sft_args("x", dir / "b", 1) +
                                                          " --set model.path= --set model.config=configs/demo-model.json"
                                                          " --set lora.quantize_base=none --set train.save_every=1");
  ASSERT_EQ(folder.exit_code, 0) << folder.output;
  const auto refused = run_ferry_cached(dir / "cache", sft_args(dir / "b" / "step-1", dir / "c", 1));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_CONTAINS(refused.output, "is not a GGUF model");
  EXPECT_CONTAINS(refused.output, "set model.path to a .gguf file or ollama:NAME");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
