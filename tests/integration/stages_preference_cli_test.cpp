// `ferry train-rm`, `ferry train-dpo` and `ferry score` end to end on shortened demo configs,
// starting from a small SFT model made once for the suite: what they write, that every offload
// policy logs `none`'s losses, that DPO's reference costs no second copy of the weights (engine
// peak on the device no larger than SFT's; the `model` reference larger), the precompute cache
// reused on resume, and bad pairs skipped and counted or rejected with file:line (exit 2).
#include <gtest/gtest.h>

#include "tests/integration/ferry_process.h"
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/io/safetensors.h"
#include "tests/run_output.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

const fs::path& base_dir() {
  static const fs::path dir = ferry_test::process_temp_dir("ferry_preference_cli");
  return dir;
}

// A small SFT model (the demo's shape, a few steps) that the RM and DPO runs start from.
class PreferenceCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(base_dir());
    const Result r = run_ferry("train-sft --config configs/demo-sft.yaml --set output.dir=" + (base_dir() / "sft").string() +
                               " --set data.max_samples=64 --set data.eval_file= --set train.micro_batch_size=8"
                               " --set train.max_steps=3 --set train.device=cpu --set logging.progress=never");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(base_dir()); }

  static std::string sft_model() { return (base_dir() / "sft" / "final").string(); }

  // A short run of a shipped stage config from the SFT model into base_dir()/name.
  static std::string short_run(const std::string& command, const std::string& config, const std::string& name) {
    return command + " --config " + config + " --set model.path=" + sft_model() +
           " --set output.dir=" + (base_dir() / name).string() +
           " --set data.max_samples=48 --set data.eval_file= --set data.eval_fraction=0.25 --set train.micro_batch_size=4"
           " --set train.max_steps=4 --set train.eval_every=2 --set train.warmup_steps=0 --set train.device=cpu"
           " --set logging.progress=never";
  }
  static std::string rm_run(const std::string& name) { return short_run("train-rm", "configs/demo-rm.yaml", name); }
  static std::string dpo_run(const std::string& name) { return short_run("train-dpo", "configs/demo-dpo.yaml", name); }
  static std::string kto_run(const std::string& name) { return short_run("train-kto", "configs/demo-kto.yaml", name); }
};

// The values of `key` logged in metrics.jsonl, in order.
std::vector<double> logged(const fs::path& metrics, const std::string& key) {
  return ferry_test::jsonl_values(metrics, key);
}

// The peak of weight bytes on the device a stage's result.json reports (activations, which differ
// between SFT and DPO batches, are counted apart).
long long weights_peak_bytes(const fs::path& output) {
  return ferry_test::result_figures(output).at("engine_device_weights_peak_bytes").get<long long>();
}

void expect_same_losses(const std::vector<double>& got, const std::vector<double>& want, const std::string& what,
                        double tolerance = 1e-6) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - want[i]), tolerance * std::max(1.0, std::abs(want[i]))) << what << " step " << i + 1;
  }
}

TEST_F(PreferenceCli, RewardModelTrainsExportsAndScores) {
  const Result r = run_ferry(rm_run("rm"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "48 pairs");
  EXPECT_CONTAINS(r.output, "12 of the training pairs held out for evaluation");
  const fs::path out = base_dir() / "rm";
  EXPECT_EQ(logged(out / "metrics.jsonl", "loss").size(), 4u);
  EXPECT_EQ(logged(out / "metrics.jsonl", "accuracy").size(), 4u);
  EXPECT_EQ(logged(out / "metrics.jsonl", "rewards/gap").size(), 4u);
  EXPECT_GE(logged(out / "metrics.jsonl", "eval_accuracy").size(), 2u);
  std::ifstream config(out / "final" / "config.json");
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(text, "LlamaForSequenceClassification");

  const fs::path scores = out / "scores.jsonl";
  const Result s = run_ferry("score --model " + (out / "final").string() +
                             " --data data/preference_eval.jsonl --limit 20 --output " + scores.string());
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_CONTAINS(s.output, "scored 40 responses");
  EXPECT_CONTAINS(s.output, "preference accuracy (chosen scored above rejected): ");
  EXPECT_CONTAINS(s.output, "\n  sort: ");  // per task kind (data/*.jsonl carry "kind")
  EXPECT_CONTAINS(s.output, "/4 = ");
  EXPECT_EQ(logged(scores, "reward_chosen").size(), 20u);
  const Result single = run_ferry("score --model " + (out / "final").string() + " --data data/sft_eval.jsonl --limit 5");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_CONTAINS(single.output, "scored 5 responses");
}

TEST_F(PreferenceCli, RewardModelWithLoraTrainsItsHead) {
  const Result r = run_ferry(rm_run("rm_lora") + " --set lora.rank=4 --set lora.export=merged");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The checkpoint holds the frozen base weights, the trained adapters and the score head.
  const ferry::io::TensorMap sft = ferry::io::load_safetensors(fs::path(sft_model()) / "model.safetensors");
  const ferry::io::TensorMap step = ferry::io::load_safetensors(base_dir() / "rm_lora" / "step-4" / "model.safetensors");
  for (const char* frozen : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight",
                             "model.embed_tokens.weight", "model.norm.weight"}) {
    EXPECT_TRUE(torch::equal(step.at(frozen), sft.at(frozen))) << frozen << " should stay frozen";
  }
  EXPECT_GT(step.at("model.layers.0.self_attn.q_proj.lora_B.weight").abs().max().item<double>(), 0.0)
      << "the adapters should train";
  EXPECT_EQ(step.at("score.weight").size(0), 1);
  EXPECT_EQ(step.count("lm_head.weight"), 0u);
  const Result s = run_ferry("score --model " + (base_dir() / "rm_lora" / "final").string() +
                             " --data data/preference_eval.jsonl --limit 4");
  EXPECT_EQ(s.exit_code, 0) << s.output;
  const Result adapter = run_ferry(rm_run("rm_lora2") + " --set lora.rank=4 --set lora.export=adapter");
  EXPECT_EQ(adapter.exit_code, 2);
  EXPECT_CONTAINS(adapter.output, "lora.export=merged");
}

TEST_F(PreferenceCli, RewardModelTrainsLikeNoneUnderEveryOffloadPolicy) {
  ASSERT_EQ(run_ferry(rm_run("rm_none")).exit_code, 0);
  const std::vector<double> reference = logged(base_dir() / "rm_none" / "metrics.jsonl", "loss");
  for (const std::string policy : {"optimizer", "params", "auto"}) {
    // Rows of 128 tokens (demo-rm's data.max_length): the smallest plan needs 6.5 MiB.
    const std::string extra = policy == "auto" ? " --set offload.gpu_memory=8MiB" : "";
    const Result r = run_ferry(rm_run("rm_" + policy) + " --set offload.policy=" + policy + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // auto fits the budget by splitting each micro-batch of 4 into 2 x 2: the same global batch, summed
    // in another order (step 1 differs by 3e-8), which AdamW carries on (1.1e-6 by step 3).
    expect_same_losses(logged(base_dir() / ("rm_" + policy) / "metrics.jsonl", "loss"), reference, policy,
                       policy == "auto" ? 5e-6 : 1e-6);
  }
}

TEST_F(PreferenceCli, DpoTrainsLikeNoneUnderEveryOffloadPolicy) {
  ASSERT_EQ(run_ferry(dpo_run("dpo_none")).exit_code, 0);
  const std::vector<double> reference = logged(base_dir() / "dpo_none" / "metrics.jsonl", "loss");
  ASSERT_EQ(reference.size(), 4u);
  for (const std::string policy : {"optimizer", "params", "auto"}) {
    const std::string extra = policy == "auto" ? " --set offload.gpu_memory=6MiB" : "";
    const Result r = run_ferry(dpo_run("dpo_" + policy) + " --set offload.policy=" + policy + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_losses(logged(base_dir() / ("dpo_" + policy) / "metrics.jsonl", "loss"), reference, policy);
  }
  // The LoRA-off reference too.
  const std::string lora = " --set lora.rank=4 --set lora.export=merged";
  ASSERT_EQ(run_ferry(dpo_run("dpo_lora_none") + lora).exit_code, 0);
  const Result paged = run_ferry(dpo_run("dpo_lora_params") + lora + " --set offload.policy=params");
  ASSERT_EQ(paged.exit_code, 0) << paged.output;
  EXPECT_CONTAINS(paged.output, "the policy with its LoRA adapters off");
  expect_same_losses(logged(base_dir() / "dpo_lora_params" / "metrics.jsonl", "loss"),
                     logged(base_dir() / "dpo_lora_none" / "metrics.jsonl", "loss"), "LoRA under params");
}

// The chunked LM head (train.logits_chunk) changes no loss: SFT (the summed NLL with gradients made
// in forward), DPO and ORPO (per-token log-probs, ORPO's whole-sequence NLL too), chunks that do not
// divide the tokens against all logits at once.
TEST_F(PreferenceCli, LossesDoNotDependOnTheLogitsChunk) {
  const std::string sft = "train-sft --config configs/demo-sft.yaml --set model.config= --set model.path=" + sft_model() +
                          " --set data.max_samples=16 --set data.eval_file= --set train.micro_batch_size=4"
                          " --set train.max_steps=3 --set train.device=cpu --set logging.progress=never";
  const std::vector<std::pair<std::string, std::string>> runs{
      {"sft", sft}, {"dpo", dpo_run("")}, {"orpo", dpo_run("") + " --set dpo.loss_type=orpo"}};
  for (const auto& [name, command] : runs) {
    for (const char* chunk : {"0", "7"}) {
      const fs::path out = base_dir() / ("chunk_" + name + "_" + chunk);
      const Result r = run_ferry(command + " --set output.dir=" + out.string() + " --set train.logits_chunk=" + chunk);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    const std::vector<double> all = logged(base_dir() / ("chunk_" + name + "_0") / "metrics.jsonl", "loss");
    ASSERT_FALSE(all.empty()) << name;
    expect_same_losses(logged(base_dir() / ("chunk_" + name + "_7") / "metrics.jsonl", "loss"), all, name);
  }
}

TEST_F(PreferenceCli, DpoReferenceHoldsNoSecondCopyOfTheWeights) {
  const Result sft = run_ferry("train-sft --config configs/demo-sft.yaml --set model.config= --set model.path=" +
                               sft_model() + " --set output.dir=" + (base_dir() / "sft_again").string() +
                               " --set data.max_samples=16 --set data.eval_file= --set train.micro_batch_size=4"
                               " --set train.max_steps=1 --set train.device=cpu --set logging.progress=never");
  ASSERT_EQ(sft.exit_code, 0) << sft.output;
  const Result precompute = run_ferry(dpo_run("dpo_precompute") + " --set dpo.reference=precompute");
  const Result model = run_ferry(dpo_run("dpo_model") + " --set dpo.reference=model");
  ASSERT_EQ(precompute.exit_code, 0) << precompute.output;
  ASSERT_EQ(model.exit_code, 0) << model.output;
  const long long sft_peak = weights_peak_bytes(base_dir() / "sft_again"),
                  precompute_peak = weights_peak_bytes(base_dir() / "dpo_precompute"),
                  model_peak = weights_peak_bytes(base_dir() / "dpo_model");
  ASSERT_GT(sft_peak, 0) << sft.output;
  EXPECT_LE(precompute_peak, sft_peak);
  EXPECT_GT(model_peak, precompute_peak) << "a frozen reference model is a second copy of the weights";
  // The same losses whichever way the reference is had.
  expect_same_losses(logged(base_dir() / "dpo_model" / "metrics.jsonl", "loss"),
                     logged(base_dir() / "dpo_precompute" / "metrics.jsonl", "loss"), "model vs precompute");

  // Another reference folder: precomputed (its weights loaded into the policy for the computation,
  // model.path's put back after) or held as a frozen model, the same losses; not those above.
  const std::string other = " --set dpo.reference_model=" + (base_dir() / "dpo_precompute" / "final").string();
  ASSERT_EQ(run_ferry(dpo_run("dpo_other_pre") + other + " --set dpo.reference=precompute").exit_code, 0);
  ASSERT_EQ(run_ferry(dpo_run("dpo_other_model") + other + " --set dpo.reference=model").exit_code, 0);
  const std::vector<double> other_losses = logged(base_dir() / "dpo_other_pre" / "metrics.jsonl", "loss");
  expect_same_losses(other_losses, logged(base_dir() / "dpo_other_model" / "metrics.jsonl", "loss"),
                     "another reference: precompute vs model");
  ASSERT_FALSE(other_losses.empty());
  EXPECT_GT(std::abs(other_losses[0] - logged(base_dir() / "dpo_precompute" / "metrics.jsonl", "loss")[0]), 1e-6);

  const std::string lora = " --set lora.rank=4 --set lora.export=merged";
  const Result sft_lora = run_ferry("train-sft --config configs/demo-sft.yaml --set model.config= --set model.path=" +
                                    sft_model() + " --set output.dir=" + (base_dir() / "sft_lora").string() +
                                    " --set data.max_samples=16 --set data.eval_file= --set train.micro_batch_size=4"
                                    " --set train.max_steps=1 --set train.device=cpu --set logging.progress=never" + lora);
  const Result lora_off = run_ferry(dpo_run("dpo_lora_off") + lora);
  ASSERT_EQ(sft_lora.exit_code, 0) << sft_lora.output;
  ASSERT_EQ(lora_off.exit_code, 0) << lora_off.output;
  EXPECT_LE(weights_peak_bytes(base_dir() / "dpo_lora_off"), weights_peak_bytes(base_dir() / "sft_lora"));
}

TEST_F(PreferenceCli, PrecomputedReferenceIsCachedAndReusedOnResume) {
  const Result first = run_ferry(dpo_run("dpo_cache"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_CONTAINS(first.output, "computed once, cached in");
  EXPECT_TRUE(fs::exists(base_dir() / "dpo_cache" / "reference_logps.safetensors"));
  const Result resumed = run_ferry(dpo_run("dpo_cache") + " --set train.max_steps=6 --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "reference log-probs: read from");
  EXPECT_CONTAINS(resumed.output, "resumed from");
  // Other pairs: recomputed, not read.
  const Result other = run_ferry(dpo_run("dpo_cache") + " --set data.max_samples=40 --set train.max_steps=8 --set train.resume=auto");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_CONTAINS(other.output, "was made for other pairs or another reference model");
}

TEST_F(PreferenceCli, EveryLossTypeRuns) {
  for (const std::string loss : {"robust", "hinge", "ipo", "simpo", "orpo"}) {
    const std::string smoothing = loss == "robust" ? " --set dpo.label_smoothing=0.1" : "";
    const Result r = run_ferry(dpo_run("dpo_" + loss) + " --set dpo.loss_type=" + loss + smoothing);
    ASSERT_EQ(r.exit_code, 0) << loss << "\n" << r.output;
    EXPECT_EQ(logged(base_dir() / ("dpo_" + loss) / "metrics.jsonl", "rewards/margins").size(), 4u) << loss;
  }
  const Result no_lora = run_ferry(dpo_run("dpo_bad") + " --set dpo.reference=lora_off");
  EXPECT_EQ(no_lora.exit_code, 2);
  EXPECT_CONTAINS(no_lora.output, "dpo.reference lora_off");
}

TEST_F(PreferenceCli, BadPairsAreSkippedAndCountedOrRejected) {
  const fs::path data = base_dir() / "bad_pairs.jsonl";
  {
    std::ofstream out(data);
    std::ifstream shipped(std::string(FERRY_SOURCE_DIR) + "/data/preference_train.jsonl");
    std::string line;
    for (int i = 0; i < 20 && std::getline(shipped, line); ++i) out << line << "\n";
    out << R"({"prompt": "Q", "chosen": "", "rejected": "b"})" << "\n";
    out << R"({"prompt": "Q", "chosen": "same", "rejected": "same"})" << "\n";
    out << R"({"prompt": ")" << std::string(400, 'x') << R"(", "chosen": "a", "rejected": "b"})" << "\n";
  }
  const std::string run = "train-rm --config configs/demo-rm.yaml --set model.path=" + sft_model() +
                          " --set data.train_file=" + data.string() + " --set data.eval_file= --set output.dir=" +
                          (base_dir() / "rm_bad").string() +
                          " --set train.micro_batch_size=4 --set train.max_steps=1 --set train.device=cpu"
                          " --set logging.progress=never";
  const Result strict = run_ferry(run);
  EXPECT_EQ(strict.exit_code, 2) << strict.output;
  EXPECT_CONTAINS(strict.output, data.string() + ":21: bad pair: the chosen response is empty");
  const Result skipping = run_ferry(run + " --set data.skip_bad_lines=true");
  ASSERT_EQ(skipping.exit_code, 0) << skipping.output;
  EXPECT_CONTAINS(skipping.output, "20 pairs");
  EXPECT_CONTAINS(skipping.output, "1 empty response, 1 chosen identical to rejected, 1 prompt leaving no room");
  std::ifstream stats(base_dir() / "rm_bad" / "data_stats.json");
  const std::string logged_stats((std::istreambuf_iterator<char>(stats)), std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(logged_stats, "\"identical\": 1");
  EXPECT_CONTAINS(logged_stats, "\"no_room\": 1");
}

// train-kto from the demo's preference pairs (split into unpaired examples): every offload policy
// and the three references give `none`'s / each other's losses, the precomputed reference (KL rows
// included) is cached and read back on resume, and unpaired lines train too.
TEST_F(PreferenceCli, KtoTrainsLikeNoneUnderEveryOffloadPolicyAndReference) {
  const Result none = run_ferry(kto_run("kto_none"));
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_CONTAINS(none.output, "48 examples (24 desirable, 24 undesirable; 48 split from preference pairs)");
  EXPECT_CONTAINS(none.output, "micro-batches of 4 examples with their KL rows");
  const std::vector<double> reference = logged(base_dir() / "kto_none" / "metrics.jsonl", "loss");
  ASSERT_EQ(reference.size(), 4u);
  EXPECT_EQ(logged(base_dir() / "kto_none" / "metrics.jsonl", "kl").size(), 4u);
  for (const std::string policy : {"optimizer", "params"}) {
    const Result r = run_ferry(kto_run("kto_" + policy) + " --set offload.policy=" + policy);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_losses(logged(base_dir() / ("kto_" + policy) / "metrics.jsonl", "loss"), reference, policy);
  }
  const Result model = run_ferry(kto_run("kto_model") + " --set kto.reference=model");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  expect_same_losses(logged(base_dir() / "kto_model" / "metrics.jsonl", "loss"), reference, "kto.reference model");
  const Result resumed = run_ferry(kto_run("kto_none") + " --set train.max_steps=6 --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "reference log-probs: read from");
  // With LoRA the reference is the policy with its adapters off; apo_zero_unpaired runs without KL rows.
  const Result lora = run_ferry(kto_run("kto_lora") + " --set lora.rank=4 --set kto.loss_type=apo_zero_unpaired");
  ASSERT_EQ(lora.exit_code, 0) << lora.output;
  EXPECT_CONTAINS(lora.output, "the policy with its LoRA adapters off");

  // Unpaired lines (TRL's conversational unpaired preference rows).
  const fs::path data = base_dir() / "unpaired.jsonl";
  {
    std::ofstream out(data);
    for (int i = 0; i < 12; ++i) {
      out << R"({"prompt": [{"role": "user", "content": "sort: 3 1 )" << i
          << R"("}], "completion": [{"role": "assistant", "content": "1 3 )" << i << R"("}], "label": )"
          << (i % 3 != 0 ? "true" : "false") << "}\n";
    }
  }
  const Result unpaired = run_ferry(kto_run("kto_unpaired") + " --set data.train_file=" + data.string());
  ASSERT_EQ(unpaired.exit_code, 0) << unpaired.output;
  EXPECT_CONTAINS(unpaired.output, "12 examples (8 desirable, 4 undesirable)");
}

TEST_F(PreferenceCli, KtoAndDpoRejectWhatTheyCannotUse) {
  const Result single = run_ferry(kto_run("kto_bad") + " --set train.micro_batch_size=1");
  EXPECT_EQ(single.exit_code, 2) << single.output;
  EXPECT_CONTAINS(single.output, "train.micro_batch_size: KTO estimates its KL term");
  const fs::path data = base_dir() / "no_label.jsonl";
  std::ofstream(data) << R"({"prompt": "Q", "completion": "A", "label": true})" << "\n"
                      << R"({"prompt": "Q", "completion": "B"})" << "\n";
  const Result no_label = run_ferry(kto_run("kto_bad") + " --set data.train_file=" + data.string());
  EXPECT_EQ(no_label.exit_code, 2) << no_label.output;
  EXPECT_CONTAINS(no_label.output, data.string() + ":2");
  const Result weights = run_ferry(dpo_run("dpo_bad") + " --set dpo.loss_type=[sigmoid,sft] --set dpo.loss_weights=[1]");
  EXPECT_EQ(weights.exit_code, 2) << weights.output;
  EXPECT_CONTAINS(weights.output, "dpo.loss_weights has 1 weights for 2 losses");
  const Result simpo = run_ferry(dpo_run("dpo_bad") + " --set dpo.loss_type=[simpo,sft]");
  EXPECT_EQ(simpo.exit_code, 2) << simpo.output;
  EXPECT_CONTAINS(simpo.output, "cannot be combined");
}

// MPO (several DPO losses with weights) and LD-DPO run as a user writes them, and the weights count.
TEST_F(PreferenceCli, CombinedDpoLossesAndLengthWeightingRun) {
  const std::string mpo = " --set dpo.loss_type=[sigmoid,bco_pair,sft] --set dpo.loss_weights=[0.8,0.2,1.0]";
  const Result r = run_ferry(dpo_run("dpo_mpo") + mpo + " --set dpo.ld_alpha=0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "loss 0.8 x sigmoid + 0.2 x bco_pair + 1 x sft");
  EXPECT_EQ(logged(base_dir() / "dpo_mpo" / "metrics.jsonl", "loss").size(), 4u);
  const Result twice = run_ferry(dpo_run("dpo_mpo2") + " --set dpo.loss_type=[sigmoid,bco_pair,sft] "
                                 "--set dpo.loss_weights=[1.6,0.4,2.0] --set dpo.ld_alpha=0.5");
  ASSERT_EQ(twice.exit_code, 0) << twice.output;
  const double first = logged(base_dir() / "dpo_mpo" / "metrics.jsonl", "loss")[0];
  EXPECT_NEAR(logged(base_dir() / "dpo_mpo2" / "metrics.jsonl", "loss")[0], 2 * first, 1e-5);
}

// Online DPO (dpo.online) as a user runs it: two answers per prompt ranked by the verifier, every
// offload policy gives `none`'s losses, the LoRA-off reference, resume, and what it refuses.
TEST_F(PreferenceCli, OnlineDpoTrainsFromItsOwnAnswers) {
  auto online = [&](const std::string& name) {
    return "train-dpo --config configs/demo-online-dpo.yaml --set model.path=" + sft_model() +
           " --set output.dir=" + (base_dir() / name).string() +
           " --set data.eval_file= --set train.micro_batch_size=4 --set train.max_steps=3 --set train.save_every=2"
           " --set generation.max_new_tokens=8 --set train.device=cpu --set logging.progress=never";
  };
  const Result none = run_ferry(online("odpo_none"));
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_CONTAINS(none.output, "train-dpo: online;");
  EXPECT_CONTAINS(none.output, "reference: a frozen model from");
  const std::vector<double> losses = logged(base_dir() / "odpo_none" / "metrics.jsonl", "loss");
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_NEAR(losses[0], std::log(2.0), 1e-5) << "the first step's policy is its reference";
  EXPECT_EQ(logged(base_dir() / "odpo_none" / "metrics.jsonl", "objective/scores_margin").size(), 3u);
  const Result params = run_ferry(online("odpo_params") + " --set offload.policy=params");
  ASSERT_EQ(params.exit_code, 0) << params.output;
  expect_same_losses(logged(base_dir() / "odpo_params" / "metrics.jsonl", "loss"), losses, "params", 1e-5);
  const Result resumed = run_ferry(online("odpo_none") + " --set train.max_steps=4 --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  const Result lora = run_ferry(online("odpo_lora") + " --set lora.rank=4");
  ASSERT_EQ(lora.exit_code, 0) << lora.output;
  EXPECT_CONTAINS(lora.output, "the policy with its LoRA adapters off");

  const Result precompute = run_ferry(online("odpo_bad") + " --set dpo.reference=precompute");
  EXPECT_EQ(precompute.exit_code, 2) << precompute.output;
  EXPECT_CONTAINS(precompute.output, "cannot be precomputed");
  const Result no_rewards = run_ferry(online("odpo_bad") + " --set rewards=[]");
  EXPECT_EQ(no_rewards.exit_code, 2) << no_rewards.output;
  EXPECT_CONTAINS(no_rewards.output, "rewards: online DPO learns from rewards you list");
}

}  // namespace
