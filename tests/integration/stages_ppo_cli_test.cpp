// `ferry train-ppo` and `ferry pipeline` as a user runs them, on the demo data with a few steps of
// a demo-shaped SFT model and reward model: the pipeline SFT -> RM -> PPO ends with its summary,
// a rerun reuses every finished stage (--force reruns) unless its data or an earlier stage changed,
// and the bad moments — an empty prompt file, prompts longer than data.max_length, a reward model that scores NaN — are clear errors or
// counted skips that never reach the weights — and SIGTERM saves a checkpoint a resume completes.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ferry_process.h"
#include "src/io/hf_checkpoint.h"
#include "src/model/pretrained.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

const fs::path& base_dir() {
  static const fs::path dir = ferry_test::process_temp_dir("ferry_ppo_cli");
  return dir;
}

std::string write_file(const std::string& name, const std::string& text) {
  return ferry_test::write_text(base_dir(), name, text);
}

const std::string& kQuiet = ferry_test::kQuietCpu;

std::string sft_stage() { return ferry_test::quick_sft_stage(base_dir(), "data/sft_eval.jsonl"); }

std::string rm_stage() {
  return write_file("rm.yaml", "stage: rm\nmodel: {path: " + (base_dir() / "sft" / "final").string() + "}\n"
                               "tokenizer: {chat_template: demo}\n"
                               "data: {train_file: data/preference_train.jsonl, eval_file: data/preference_eval.jsonl,"
                               " max_samples: 64, max_length: 64}\n"
                               "train: {micro_batch_size: 8, max_steps: 3, learning_rate: 1.0e-3}\n"
                               "output: {dir: " + (base_dir() / "rm").string() + "}\n");
}

std::string ppo_stage() {
  return write_file("ppo.yaml", "stage: ppo\nmodel: {path: " + (base_dir() / "sft" / "final").string() + "}\n"
                                "tokenizer: {chat_template: demo}\n"
                                "data: {prompt_file: data/prompts_train.jsonl, eval_file: data/prompts_eval.jsonl,"
                                " max_samples: 32, max_length: 64}\n"
                                "generation: {max_new_tokens: 8}\n"
                                "train: {micro_batch_size: 4, max_steps: 2, learning_rate: 1.0e-4}\n"
                                "ppo: {reward_model: " + (base_dir() / "rm" / "final").string() + ", rollout_batch_size: 8}\n"
                                "output: {dir: " + (base_dir() / "ppo").string() + "}\n");
}

// The pipeline runs once (it makes the models every check uses); each check is a function called
// from the one test below, so the pipeline is not rerun per test process.
Result* first_run_ = nullptr;
std::string pipeline_;

void PipelineRunsEveryStageAndEndsWithTheSummary() {
  const Result& r = *first_run_;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "pipeline summary");
  EXPECT_CONTAINS(r.output, "eval loss");
  EXPECT_CONTAINS(r.output, "held-out pair accuracy");
  EXPECT_CONTAINS(r.output, "2 rollouts");
  EXPECT_CONTAINS(r.output, "held-out prompts (data/prompts_eval.jsonl)");
  EXPECT_CONTAINS(r.output, "exact match");
  EXPECT_CONTAINS(r.output, "mean reward");
  for (const char* folder : {"ppo/final/config.json", "ppo/final_critic/config.json", "ppo/step-2/policy/config.json",
                             "ppo/step-2/critic/config.json", "ppo/step-2/ppo_state.json", "ppo/result.json"}) {
    EXPECT_TRUE(fs::exists(base_dir() / folder)) << folder;
  }
}

void RerunReusesFinishedStagesAndForceReruns() {
  ASSERT_EQ(first_run_->exit_code, 0) << first_run_->output;
  const Result again = run_ferry("pipeline --config " + pipeline_ + kQuiet);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_CONTAINS(again.output, "reusing " + (base_dir() / "sft").string());
  EXPECT_CONTAINS(again.output, "reusing " + (base_dir() / "ppo").string());
  EXPECT_CONTAINS(again.output, "(reused)");
  EXPECT_EQ(again.output.find("train-ppo: before training"), std::string::npos) << again.output;
  // Another config for the last stage reruns it alone.
  const Result changed = run_ferry("pipeline --config " + pipeline_ + kQuiet + " --set generation.max_new_tokens=6");
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  EXPECT_CONTAINS(changed.output, "train-ppo: before training");
}

void EmptyPromptFileAndTooLongPromptsAreClear() {
  ASSERT_EQ(first_run_->exit_code, 0) << first_run_->output;
  const std::string empty = write_file("empty.jsonl", "\n");
  const Result r = run_ferry("train-ppo --config " + ppo_stage() + kQuiet + " --set data.prompt_file=" + empty +
                             " --set output.dir=" + (base_dir() / "empty").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, empty + ": no usable prompt");
  const Result long_prompts = run_ferry("train-ppo --config " + ppo_stage() + kQuiet + " --set data.max_length=40" +
                                        " --set data.eval_file= --set train.max_steps=1 --set output.dir=" +
                                        (base_dir() / "long").string());
  EXPECT_EQ(long_prompts.exit_code, 0) << long_prompts.output;
  EXPECT_CONTAINS(long_prompts.output, "prompts of 40+ tokens");
  const Result all_long = run_ferry("train-ppo --config " + ppo_stage() + kQuiet + " --set data.max_length=8" +
                                    " --set output.dir=" + (base_dir() / "all_long").string());
  EXPECT_EQ(all_long.exit_code, 2) << all_long.output;
  EXPECT_CONTAINS(all_long.output, "every prompt longer than data.max_length");
}

void NonFiniteRewardsAreSkippedAndNeverReachTheWeights() {
  ASSERT_EQ(first_run_->exit_code, 0) << first_run_->output;
  // A reward model whose score head is NaN: every response's score is NaN.
  const fs::path broken = base_dir() / "nan_rm";
  ferry::ScoreModel rm = ferry::score_model_from_pretrained(base_dir() / "rm" / "final");
  {
    torch::NoGradGuard no_grad;
    rm->score->weight.fill_(std::numeric_limits<float>::quiet_NaN());
  }
  ferry::save_pretrained(*rm, rm->config(), broken);
  fs::copy_file(base_dir() / "rm" / "final" / "tokenizer.model", broken / "tokenizer.model");
  const fs::path output = base_dir() / "nan_run";
  const Result r = run_ferry("train-ppo --config " + ppo_stage() + kQuiet + " --set data.eval_file= --set ppo.reward_model=" +
                             broken.string() + " --set ppo.critic_model=" + (base_dir() / "rm" / "final").string() +
                             " --set output.dir=" + output.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "8 of 8 responses had a non-finite score");
  EXPECT_CONTAINS(r.output, "16 responses left out");
  const auto before = ferry::io::load_hf_weights(base_dir() / "sft" / "final");
  const auto after = ferry::io::load_hf_weights(output / "final");
  for (const auto& [name, tensor] : before) EXPECT_TRUE(torch::equal(tensor, after.at(name))) << name;
}

std::vector<std::string> metrics_lines(const fs::path& output) {
  std::vector<std::string> lines;
  std::ifstream in(output / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void LoraPolicyIsItsOwnReferenceAndPtxAndAdaptiveKlRun() {
  ASSERT_EQ(first_run_->exit_code, 0) << first_run_->output;
  const fs::path output = base_dir() / "lora_ptx";
  const Result r = run_ferry("train-ppo --config " + ppo_stage() + kQuiet + " --set data.eval_file= --set lora.rank=4" +
                             " --set ppo.ptx_coef=0.5 --set data.train_file=data/sft_eval.jsonl --set ppo.kl_target=0.01" +
                             " --set ppo.kl_horizon=100 --set output.dir=" + output.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "reference: the policy with its LoRA adapters off");
  const auto lines = metrics_lines(output);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_CONTAINS(lines[0], "\"ptx_loss\"");
  // The adaptive controller moves the coefficient after each rollout (0.05 at the first; the first
  // rollout's KL is 0, below the target, so it falls).
  EXPECT_CONTAINS(lines[0], "\"kl_coef\":0.05");
  EXPECT_EQ(lines[1].find("\"kl_coef\":0.05,"), std::string::npos) << lines[1];
  EXPECT_TRUE(fs::exists(output / "final" / "model.safetensors"));  // merged: a plain Hugging Face folder
  EXPECT_TRUE(fs::exists(output / "step-2" / "policy" / "adapter_config.json"));
}

// metrics.jsonl rows (every row has a "step").
int count_rows(const fs::path& file) { return ferry_test::count_lines_with(file.string(), "\"step\""); }

// SIGTERM mid-run: the rollout finishes, a checkpoint is saved, the run exits 128 + 15 saying how
// to resume, and resuming from it completes.
void SigtermSavesACheckpointAndResumes() {
  ASSERT_EQ(first_run_->exit_code, 0) << first_run_->output;
  const fs::path out = base_dir() / "sigterm";
  const std::string args = "train-ppo --config " + ppo_stage() + kQuiet + " --set data.eval_file= --set train.save_every=0" +
                           " --set train.max_steps=100000 --set output.dir=" + out.string();
  const fs::path log = base_dir() / "sigterm.log";
  const pid_t child = ferry_test::start_ferry(args, log.string());
  ASSERT_GE(child, 0);
  for (int i = 0; i < 600 && count_rows(out / "metrics.jsonl") < 2; ++i) ::usleep(100 * 1000);
  ASSERT_GE(count_rows(out / "metrics.jsonl"), 2) << "the run did not start";
  const std::optional<int> stopped = ferry_test::stop_ferry(child, SIGTERM);
  ASSERT_TRUE(stopped.has_value()) << "ferry did not stop within a minute of SIGTERM";
  const int status = *stopped;
  const std::string output = ferry_test::read_text(log.string());
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << output;
  EXPECT_CONTAINS(output, "train.resume=auto");
  EXPECT_FALSE(fs::exists(out / "final")) << "an interrupted run has no final model";
  const int stopped_at = count_rows(out / "metrics.jsonl");
  const fs::path checkpoint = out / ("step-" + std::to_string(stopped_at));
  for (const char* file : {"policy/model.safetensors", "critic/model.safetensors", "ppo_state.json", "trainer_state.json"}) {
    EXPECT_TRUE(fs::exists(checkpoint / file)) << checkpoint / file << "\n" << output;
  }
  const Result resumed = run_ferry(args + " --set train.resume=auto --set train.max_steps=" + std::to_string(stopped_at + 1));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  EXPECT_EQ(count_rows(out / "metrics.jsonl"), stopped_at + 1);
  EXPECT_TRUE(fs::exists(out / "final" / "model.safetensors"));
}

// A stage is reused only while its data files are the ones it ran on, and only while every stage
// before it was reused: a changed SFT file reruns SFT and the RM stage that reads its model.
TEST(PpoCli, PipelineRerunsAStageWhoseDataChangedAndEveryLaterStage) {
  const fs::path dir = ferry_test::process_temp_dir("ferry_pipeline_inputs");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path data = dir / "sft.jsonl";
  fs::copy_file(fs::path(FERRY_SOURCE_DIR) / "data" / "sft_eval.jsonl", data);
  const std::string sft = ferry_test::write_text(
      dir, "sft.yaml",
      "stage: sft\nmodel: {config: configs/demo-model.json}\ntokenizer: {path: data/tokenizer.model, chat_template: demo}\n"
      "data: {train_file: " + data.string() + ", max_length: 64}\n"
      "train: {micro_batch_size: 8, max_steps: 2, learning_rate: 1.0e-3}\noutput: {dir: " + (dir / "sft").string() + "}\n");
  const std::string rm = ferry_test::write_text(
      dir, "rm.yaml",
      "stage: rm\nmodel: {path: " + (dir / "sft" / "final").string() + "}\ntokenizer: {chat_template: demo}\n"
      "data: {train_file: data/preference_eval.jsonl, max_samples: 32, max_length: 64}\n"
      "train: {micro_batch_size: 8, max_steps: 2, learning_rate: 1.0e-3}\noutput: {dir: " + (dir / "rm").string() + "}\n");
  const std::string pipeline = ferry_test::write_text(dir, "pipeline.yaml", "pipeline:\n  stages: [" + sft + ", " + rm + "]\n");
  const Result first = run_ferry("pipeline --config " + pipeline + kQuiet);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const Result same = run_ferry("pipeline --config " + pipeline + kQuiet);
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_CONTAINS(same.output, "reusing " + (dir / "sft").string());
  EXPECT_CONTAINS(same.output, "reusing " + (dir / "rm").string());
  const std::string lines = ferry_test::read_text(data);
  std::ofstream(data, std::ios::app) << lines.substr(0, lines.find('\n') + 1);  // its first line once more
  const Result changed = run_ferry("pipeline --config " + pipeline + kQuiet);
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  EXPECT_CONTAINS(changed.output, "running again (" + (dir / "sft").string() + ": " + data.string() + " changed since it ran)");
  EXPECT_CONTAINS(changed.output, "running again (" + (dir / "rm").string() + ": an earlier stage ran again)");
  EXPECT_EQ(changed.output.find("reusing"), std::string::npos) << changed.output;
}

TEST(PpoCli, PipelineThenEachCheck) {
  fs::remove_all(base_dir());
  fs::create_directories(base_dir());
  pipeline_ = write_file("pipeline.yaml", "pipeline:\n  stages: [" + sft_stage() + ", " + rm_stage() + ", " + ppo_stage() + "]\n");
  Result first = run_ferry("pipeline --config " + pipeline_ + kQuiet);
  first_run_ = &first;
  {
    SCOPED_TRACE("PipelineRunsEveryStageAndEndsWithTheSummary");
    PipelineRunsEveryStageAndEndsWithTheSummary();
  }
  {
    SCOPED_TRACE("RerunReusesFinishedStagesAndForceReruns");
    RerunReusesFinishedStagesAndForceReruns();
  }
  {
    SCOPED_TRACE("EmptyPromptFileAndTooLongPromptsAreClear");
    EmptyPromptFileAndTooLongPromptsAreClear();
  }
  {
    SCOPED_TRACE("NonFiniteRewardsAreSkippedAndNeverReachTheWeights");
    NonFiniteRewardsAreSkippedAndNeverReachTheWeights();
  }
  {
    SCOPED_TRACE("LoraPolicyIsItsOwnReferenceAndPtxAndAdaptiveKlRun");
    LoraPolicyIsItsOwnReferenceAndPtxAndAdaptiveKlRun();
  }
  {
    SCOPED_TRACE("SigtermSavesACheckpointAndResumes");
    SigtermSavesACheckpointAndResumes();
  }
  first_run_ = nullptr;
  fs::remove_all(base_dir());
}

}  // namespace
