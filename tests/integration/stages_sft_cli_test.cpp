// `ferry train-sft` end to end on the demo config, shortened: exit code, metrics.jsonl, step
// folders, final/ (loadable by `ferry eval`), the resolved config; a second invocation with
// train.resume=auto continues from the newest checkpoint; bad inputs exit 2 with the name to fix;
// every offload policy trains like `none`; SIGTERM saves a checkpoint and exits 143.
#include <gtest/gtest.h>

#include "tests/integration/ferry_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

using ferry_test::count_lines_with;

// A small, fast version of configs/demo-sft.yaml (the tiny model of the unit tests).
std::string small_run(const fs::path& out) {
  return "train-sft --config configs/demo-sft.yaml --set output.dir=" + out.string() +
         " --set data.max_samples=64 --set data.eval_file= --set data.eval_fraction=0.1"
         " --set train.micro_batch_size=4 --set train.max_steps=4"
         " --set train.save_every=2 --set train.eval_every=2 --set train.device=cpu --set logging.progress=never";
}

TEST(TrainSftCli, ShortDemoRunWritesEverything) {
  const fs::path out = fs::temp_directory_path() / ("ferry_sft_cli_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const Result r = run_ferry(small_run(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "64 samples");
  EXPECT_CONTAINS(r.output, "6 eval samples");
  EXPECT_TRUE(fs::exists(out / "config.yaml"));
  EXPECT_TRUE(fs::exists(out / "metrics.jsonl"));
  EXPECT_EQ(count_lines_with(out / "metrics.jsonl", "\"loss\""), 4);
  EXPECT_GE(count_lines_with(out / "metrics.jsonl", "\"eval_loss\""), 2);
  for (const char* folder : {"step-2", "step-4"}) {
    EXPECT_TRUE(fs::exists(out / folder / "model.safetensors")) << folder;
    EXPECT_TRUE(fs::exists(out / folder / "trainer_state.json")) << folder;
    EXPECT_TRUE(fs::exists(out / folder / "optimizer_state.safetensors")) << folder;
  }
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.model"}) {
    EXPECT_TRUE(fs::exists(out / "final" / file)) << file;
  }

  // Resume: 2 more steps on top of step-4.
  const Result resumed = run_ferry(small_run(out) + " --set train.max_steps=6 --set train.resume=auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  EXPECT_EQ(count_lines_with(out / "metrics.jsonl", "\"loss\""), 6);
  EXPECT_TRUE(fs::exists(out / "step-6"));
  EXPECT_FALSE(fs::exists(out / "step-2")) << "output.keep_last (2) prunes older checkpoints";

  // Batches of 3 over 8 prompts (the last one short), every answer written in file order.
  const fs::path answers = out / "answers.jsonl";
  const Result eval = run_ferry("eval --model " + (out / "final").string() +
                                " --limit 8 --max-new-tokens 8 --batch-size 3 --output " + answers.string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_CONTAINS(eval.output, "exact match: ");
  EXPECT_CONTAINS(eval.output, "\n  reverse: ");  // per task kind
  EXPECT_CONTAINS(eval.output, "/8 = ");
  EXPECT_EQ(count_lines_with(answers, "\"answer\""), 8);
  std::ifstream prompts_file(std::string(FERRY_SOURCE_DIR) + "/data/prompts_eval.jsonl"), answers_file(answers);
  for (std::string prompt, answer; std::getline(answers_file, answer) && std::getline(prompts_file, prompt);) {
    const std::string gt = prompt.substr(prompt.find("\"gt_answer\""));  // each answer line echoes its prompt's
    EXPECT_CONTAINS(answer, gt.substr(0, gt.find('"', 14) + 1));
  }
  fs::remove_all(out);
}

TEST(TrainSftCli, BadInputsAreUserErrors) {
  const Result missing = run_ferry("train-sft --config configs/demo-sft.yaml --set data.train_file=nope.jsonl "
                                   "--set output.dir=/tmp/ferry_sft_cli_missing --set train.device=cpu");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_CONTAINS(missing.output, "nope.jsonl");
  // A budget no policy fits in: the engine's first page-in names the key to raise.
  const fs::path out = fs::temp_directory_path() / ("ferry_sft_cli_budget_" + std::to_string(::getpid()));
  const Result budget = run_ferry(small_run(out) + " --set offload.policy=params --set offload.gpu_memory=16KiB");
  EXPECT_EQ(budget.exit_code, 2) << budget.output;
  EXPECT_CONTAINS(budget.output, "offload.gpu_memory");
  const Result planned = run_ferry(small_run(out) + " --set offload.policy=auto --set offload.gpu_memory=16KiB");
  EXPECT_EQ(planned.exit_code, 2) << planned.output;
  EXPECT_CONTAINS(planned.output, "offload.policy auto");
  // What users give by mistake as data.train_file: a folder (once "internal error: basic_filebuf"),
  // an empty file, a binary file. Each is exit 2 naming it.
  const fs::path bad = fs::temp_directory_path() / ("ferry_sft_cli_bad_" + std::to_string(::getpid()));
  fs::create_directories(bad / "folder");
  std::ofstream(bad / "empty.jsonl").flush();
  std::ofstream(bad / "model.bin", std::ios::binary) << std::string("\x7f\0\0\x01weights", 11);
  for (const fs::path& path : {bad / "folder", bad / "empty.jsonl", bad / "model.bin"}) {
    const Result r = run_ferry("train-sft --config configs/demo-sft.yaml --set data.train_file=" + path.string() +
                               " --set output.dir=/tmp/ferry_sft_cli_missing --set train.device=cpu");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_CONTAINS(r.output, path.string());
  }
  fs::remove_all(bad);
  fs::remove_all("/tmp/ferry_sft_cli_missing");
  fs::remove_all(out);
}

// The losses logged in metrics.jsonl, in order.
std::vector<double> logged_losses(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::vector<double> losses;
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("\"loss\":");
    if (at != std::string::npos) losses.push_back(std::stod(line.substr(at + 7)));
  }
  return losses;
}

// Every offload policy is a runtime choice of train-sft: the same run under `optimizer`, `params`
// and `auto` (within a budget on the emulated device) logs the losses of `none`; so does LoRA
// under `params`.
TEST(TrainSftCli, OffloadPoliciesTrainLikeNone) {
  const fs::path base = fs::temp_directory_path() / ("ferry_sft_cli_offload_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const Result none = run_ferry(small_run(base / "none"));
  ASSERT_EQ(none.exit_code, 0) << none.output;
  const std::vector<double> reference = logged_losses(base / "none" / "metrics.jsonl");
  ASSERT_EQ(reference.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"optimizer", " --set offload.policy=optimizer"},
      {"params", " --set offload.policy=params --set offload.prefetch=2"},
      {"auto", " --set offload.policy=auto --set offload.gpu_memory=6MiB"},
  };
  for (const auto& [name, settings] : runs) {
    const Result r = run_ferry(small_run(base / name) + settings);
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_CONTAINS(r.output, "engine peak");
    EXPECT_EQ(r.output.find("over offload.gpu_memory"), std::string::npos) << r.output;  // auto stays within
    const std::vector<double> losses = logged_losses(base / name / "metrics.jsonl");
    ASSERT_EQ(losses.size(), reference.size()) << name;
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], reference[i], 1e-6 * std::abs(reference[i])) << name << " step " << i + 1;
    }
  }
  // Under `none` nothing holds the run to the budget: the emulated device (activations counted)
  // says what a GPU of that size would do.
  const Result over = run_ferry(small_run(base / "over") + " --set offload.gpu_memory=1MiB");
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_CONTAINS(over.output, "over offload.gpu_memory (1.00 MiB): on a GPU of that size this run would run out of memory");
  // LoRA: frozen base weights are paged like the rest, only the adapters train.
  const std::string lora = " --set lora.rank=4 --set lora.export=adapter";
  const Result lora_none = run_ferry(small_run(base / "lora_none") + lora);
  ASSERT_EQ(lora_none.exit_code, 0) << lora_none.output;
  const Result lora_params = run_ferry(small_run(base / "lora_params") + lora + " --set offload.policy=params");
  ASSERT_EQ(lora_params.exit_code, 0) << lora_params.output;
  const std::vector<double> lora_reference = logged_losses(base / "lora_none" / "metrics.jsonl");
  const std::vector<double> lora_paged = logged_losses(base / "lora_params" / "metrics.jsonl");
  ASSERT_EQ(lora_paged.size(), lora_reference.size());
  for (size_t i = 0; i < lora_paged.size(); ++i) {
    EXPECT_NEAR(lora_paged[i], lora_reference[i], 1e-6 * std::abs(lora_reference[i])) << "LoRA step " << i + 1;
  }
  EXPECT_TRUE(fs::exists(base / "lora_params" / "final" / "adapter_model.safetensors"));

  // offload.overlap_step (AdamW during backward, no clipping): the losses of none without clipping,
  // for full fine-tuning under optimizer and LoRA under params.
  const std::string unclipped = " --set train.max_grad_norm=0";
  const std::string overlap = unclipped + " --set offload.overlap_step=true";
  const std::vector<std::array<std::string, 3>> overlap_runs = {
      {"overlap_optimizer", unclipped, overlap + " --set offload.policy=optimizer"},
      {"overlap_lora_params", unclipped + lora, overlap + lora + " --set offload.policy=params"},
  };
  for (const auto& [name, reference_settings, settings] : overlap_runs) {
    const Result plain = run_ferry(small_run(base / (name + "_none")) + reference_settings);
    ASSERT_EQ(plain.exit_code, 0) << name << "\n" << plain.output;
    const Result r = run_ferry(small_run(base / name) + settings);
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    const std::vector<double> expected = logged_losses(base / (name + "_none") / "metrics.jsonl");
    const std::vector<double> losses = logged_losses(base / name / "metrics.jsonl");
    ASSERT_EQ(losses.size(), expected.size()) << name;
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], expected[i], 1e-6 * std::abs(expected[i])) << name << " step " << i + 1;
    }
  }
  // With clipping it is refused before anything runs, naming both keys.
  const Result clipped = run_ferry(small_run(base / "overlap_clipped") + " --set offload.policy=optimizer --set offload.overlap_step=true");
  EXPECT_EQ(clipped.exit_code, 2) << clipped.output;
  EXPECT_CONTAINS(clipped.output, "offload.overlap_step");
  EXPECT_CONTAINS(clipped.output, "train.max_grad_norm=0");
  fs::remove_all(base);
}

// SIGTERM mid-run (what a cluster scheduler or `kill` sends): the run finishes its step, saves a
// checkpoint, says how to resume and exits 128 + 15; resuming from that checkpoint completes.
TEST(TrainSftCli, SigtermSavesACheckpointAndExitsWithTheSignal) {
  const fs::path out = fs::temp_directory_path() / ("ferry_sft_cli_sigterm_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string args = small_run(out) + " --set train.max_steps=100000 --set train.save_every=0";
  const fs::path log = out.string() + ".log";
  const pid_t child = ferry_test::start_ferry(args, log.string());
  ASSERT_GE(child, 0);
  // Wait for a few logged steps (at most a minute), then ask it to stop.
  for (int i = 0; i < 600 && count_lines_with(out / "metrics.jsonl", "\"loss\"") < 3; ++i) ::usleep(100 * 1000);
  ASSERT_GE(count_lines_with(out / "metrics.jsonl", "\"loss\""), 3) << "the run did not start";
  const std::optional<int> stopped = ferry_test::stop_ferry(child, SIGTERM);  // a step and a save take well under a minute
  ASSERT_TRUE(stopped.has_value()) << "ferry did not stop within a minute of SIGTERM";
  const int status = *stopped;
  const std::string output = ferry_test::read_text(log.string());
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << output;
  EXPECT_CONTAINS(output, "stopped by signal 15");
  EXPECT_CONTAINS(output, "train.resume=auto");
  EXPECT_FALSE(fs::exists(out / "final")) << "an interrupted run has no final model";

  // The checkpoint is the last logged step, complete, and resuming from it goes on from there.
  const int stopped_at = count_lines_with(out / "metrics.jsonl", "\"loss\"");
  const fs::path checkpoint = out / ("step-" + std::to_string(stopped_at));
  for (const char* file : {"model.safetensors", "trainer_state.json", "optimizer_state.safetensors"}) {
    EXPECT_TRUE(fs::exists(checkpoint / file)) << checkpoint / file << "\n" << output;
  }
  const Result resumed = run_ferry(small_run(out) + " --set train.resume=auto --set train.max_steps=" +
                                   std::to_string(stopped_at + 2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  EXPECT_TRUE(fs::exists(out / "final" / "model.safetensors"));
  fs::remove_all(out);
  fs::remove(log);
}

}  // namespace
