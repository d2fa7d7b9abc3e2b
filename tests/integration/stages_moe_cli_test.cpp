// A Mixture of Experts through the `ferry` command (tests/data/models/tiny-qwen3-moe.json: 8 experts,
// top-2, output_router_logits on): SFT from scratch logs the load-balancing loss and the experts'
// load; LoRA says how many expert matrices carry adapters (none, or all with `experts`); QLoRA
// keeps the experts in NF4 and the routers float; GRPO, PPO (RLOO), online DPO and distillation
// train the MoE policy; the merged export is a Qwen3MoeForCausalLM folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/ferry_process.h"
#include "tests/run_output.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

const fs::path& base_dir() {
  static const fs::path dir = ferry_test::process_temp_dir("ferry_moe_cli");
  return dir;
}

const std::string& kQuiet = ferry_test::kQuietCpu;

// The SFT run every test starts from: 6 steps from scratch on the demo data.
const fs::path& sft_model() {
  static const fs::path final_dir = [] {
    const fs::path out = base_dir() / "sft";
    const Result r = run_ferry("train-sft --config configs/demo-sft.yaml" + kQuiet +
                               " --set model.config=tests/data/models/tiny-qwen3-moe.json --set data.max_samples=64"
                               " --set data.eval_file= --set train.micro_batch_size=8 --set train.max_steps=6"
                               " --set train.save_every=6 --set train.eval_every=0 --set output.dir=" + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out / "final";
  }();
  return final_dir;
}

TEST(MoeCli, SftLogsTheLoadBalancingLossAndTheExpertsLoad) {
  ASSERT_TRUE(fs::exists(sft_model() / "config.json"));
  const auto rows = ferry_test::metrics_rows(sft_model().parent_path());
  int logged = 0;
  for (const auto& row : rows) {
    if (!row.contains("loss")) continue;
    ASSERT_TRUE(row.contains("moe_aux_loss")) << row.dump();
    ASSERT_TRUE(row.contains("moe_load_imbalance")) << row.dump();
    // aux is num_experts x sum(share x probability): 1 when balanced, at most num_experts / top-k... > 0.
    EXPECT_GT(row["moe_aux_loss"].get<double>(), 0.5);
    EXPECT_GE(row["moe_load_imbalance"].get<double>(), 1.0);
    ++logged;
  }
  EXPECT_EQ(logged, 6);
}

TEST(MoeCli, LoraSaysHowManyExpertMatricesCarryAdapters) {
  const std::string lora = "train-sft --config configs/demo-sft-lora.yaml" + kQuiet + " --set model.path=" +
                           sft_model().string() + " --set data.max_samples=16 --set data.eval_file= --set train.max_steps=1"
                           " --set train.micro_batch_size=8 --set train.eval_every=0 --set train.save_every=1";
  const Result attention = run_ferry(lora + " --set 'lora.target_modules=[q_proj,v_proj]' --set output.dir=" +
                                     (base_dir() / "lora_attention").string());
  ASSERT_EQ(attention.exit_code, 0) << attention.output;
  EXPECT_CONTAINS(attention.output, "0 of the 48 expert matrices (none: add gate_proj/up_proj/down_proj");
  const Result experts = run_ferry(lora + " --set 'lora.target_modules=[q_proj,experts]' --set output.dir=" +
                                   (base_dir() / "lora_experts").string());
  ASSERT_EQ(experts.exit_code, 0) << experts.output;
  EXPECT_CONTAINS(experts.output, "LoRA: 50 projections carry adapters; 48 of the 48 expert matrices");
  const Result qlora = run_ferry(lora + " --set 'lora.target_modules=[gate_proj,up_proj,down_proj]'"
                                        " --set lora.quantize_base=nf4 --set output.dir=" + (base_dir() / "qlora").string());
  ASSERT_EQ(qlora.exit_code, 0) << qlora.output;
  // 2 layers x (4 attention + 8 experts x 3) projections in NF4; the routers stay float.
  EXPECT_CONTAINS(qlora.output, "QLoRA base: 56 projections");
  const Result typo = run_ferry(lora + " --set 'lora.target_modules=[expert]' --set output.dir=" +
                                (base_dir() / "typo").string());
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_CONTAINS(typo.output, "experts");
}

TEST(MoeCli, GrpoTrainsAMoePolicy) {
  const fs::path out = base_dir() / "grpo";
  const Result r = run_ferry(
      "train-grpo --config configs/demo-grpo.yaml" + kQuiet + " --set model.path=" + sft_model().string() +
      " --set data.max_samples=16 --set data.eval_file= --set generation.max_new_tokens=8 --set train.micro_batch_size=4"
      " --set train.grad_accumulation=2 --set train.max_steps=2 --set grpo.num_generations=4"
      " --set grpo.generation_batch_size=16 --set 'rewards=[{kind: verifier}]' --set output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "final" / "config.json"));
  int logged = 0;  // the learner logs the routers' figures beside its own
  for (const auto& row : ferry_test::metrics_rows(out)) logged += row.contains("moe_aux_loss") ? 1 : 0;
  EXPECT_GE(logged, 1);
}

TEST(MoeCli, PpoOnlineDpoAndDistillTrainAMoePolicy) {
  const std::string quick = kQuiet + " --set model.path=" + sft_model().string() +
                            " --set data.eval_file= --set generation.max_new_tokens=8 --set train.micro_batch_size=4";
  const Result ppo = run_ferry("train-ppo --config configs/demo-grpo.yaml" + quick + " --set stage=ppo"
                               " --set data.max_samples=16 --set ppo.advantage_estimator=rloo --set ppo.num_generations=4"
                               " --set ppo.rollout_batch_size=4 --set train.max_steps=1 --set 'rewards=[{kind: verifier}]'"
                               " --set output.dir=" + (base_dir() / "ppo").string());
  ASSERT_EQ(ppo.exit_code, 0) << ppo.output;
  const Result dpo = run_ferry("train-dpo --config configs/demo-online-dpo.yaml" + quick +
                               " --set train.max_steps=2 --set output.dir=" + (base_dir() / "online_dpo").string());
  ASSERT_EQ(dpo.exit_code, 0) << dpo.output;
  // The MoE as the teacher of a dense student, and as a student of itself.
  const Result distill = run_ferry("train-distill --config configs/demo-distill.yaml" + kQuiet +
                                   " --set distill.teacher_model=" + sft_model().string() +
                                   " --set model.config=tests/data/models/tiny-qwen3-moe.json --set data.max_samples=16"
                                   " --set data.eval_file= --set train.micro_batch_size=1 --set train.max_steps=2"
                                   " --set train.eval_every=0 --set generation.max_new_tokens=6 --set output.dir=" +
                                   (base_dir() / "distill").string());
  ASSERT_EQ(distill.exit_code, 0) << distill.output;
  int ppo_logged = 0;
  for (const auto& row : ferry_test::metrics_rows(base_dir() / "ppo")) ppo_logged += row.contains("moe_load_imbalance") ? 1 : 0;
  EXPECT_GE(ppo_logged, 1);
  for (const char* stage : {"ppo", "online_dpo", "distill"}) {
    EXPECT_FALSE(ferry_test::metrics_rows(base_dir() / stage).empty()) << stage;
    EXPECT_CONTAINS(ferry_test::read_text(base_dir() / stage / "final" / "config.json"), "\"qwen3_moe\"") << stage;
  }
}

TEST(MoeCli, MergedExportIsAQwen3MoeFolder) {
  const fs::path out = base_dir() / "export";
  const Result r = run_ferry("export --checkpoint " + sft_model().string() + " --output " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string config = ferry_test::read_text(out / "config.json");
  EXPECT_CONTAINS(config, "\"Qwen3MoeForCausalLM\"");
  EXPECT_CONTAINS(config, "\"num_experts\": 8");
  EXPECT_CONTAINS(config, "\"output_router_logits\": true");
}

}  // namespace
