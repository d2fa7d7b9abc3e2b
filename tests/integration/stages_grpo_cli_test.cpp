// `ferry train-grpo` (and `train-ppo` without a critic) as a user runs them, from a few steps of a
// demo-shaped SFT model: the pipeline SFT -> GRPO with a verifier reward trains, checkpoints and
// ends with its summary; groups whose rewards are
// all equal give no NaN; the shipped example reward command, and a TRL reward function behind docs/data.md's
// wrapper, give exactly the verifier's run; a
// reward command that crashes, hangs past its time-out or prints a non-number ends the run with a
// message naming the command and the prompt, and the last checkpoint resumes; PPO with rloo needs
// no critic; GRPO (beta 0, no critic) holds less on the device than PPO for the same model; and
// rollouts decoded a few rows at a time (generation.max_batch_rows) learn what one batch learns.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ferry_process.h"
#include "tests/run_output.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

const fs::path& base_dir() {
  static const fs::path dir = ferry_test::process_temp_dir("ferry_grpo_cli");
  return dir;
}

std::string write_file(const std::string& name, const std::string& text) {
  return ferry_test::write_text(base_dir(), name, text);
}

const std::string& kQuiet = ferry_test::kQuietCpu;

std::string sft_stage() { return ferry_test::quick_sft_stage(base_dir()); }

// 4 prompts x 4 completions per rollout, minibatches of 8: 2 optimizer steps per rollout.
std::string grpo_stage() {
  return write_file("grpo.yaml", "stage: grpo\nmodel: {path: " + (base_dir() / "sft" / "final").string() + "}\n"
                                 "tokenizer: {chat_template: demo}\n"
                                 "data: {prompt_file: data/prompts_train.jsonl, eval_file: data/prompts_eval.jsonl,"
                                 " max_samples: 32, max_length: 64}\n"
                                 "generation: {max_new_tokens: 8}\n"
                                 "train: {micro_batch_size: 4, grad_accumulation: 2, max_steps: 2, learning_rate: 1.0e-4}\n"
                                 "grpo: {num_generations: 4, generation_batch_size: 16}\n"
                                 "rewards: [{kind: verifier}]\n"
                                 "output: {dir: " + (base_dir() / "verifier").string() + "}\n");
}

using ferry_test::metrics_rows;

nlohmann::json result_of(const fs::path& output) { return ferry_test::result_figures(output); }

// A GRPO run into base_dir()/name, without the held-out evaluation.
Result grpo(const std::string& name, const std::string& extra) {
  return run_ferry("train-grpo --config " + grpo_stage() + kQuiet + " --set data.eval_file=" + extra +
                   " --set output.dir=" + (base_dir() / name).string());
}

Result* pipeline_run_ = nullptr;

void PipelineTrainsCheckpointsAndHasNoNaN() {
  const Result& r = *pipeline_run_;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "pipeline summary");
  EXPECT_CONTAINS(r.output, "2 rollouts");
  EXPECT_CONTAINS(r.output, "train-grpo model");
  EXPECT_CONTAINS(r.output, "rewards: verifier (exact)");
  EXPECT_CONTAINS(r.output, "reference: none (beta 0)");
  EXPECT_CONTAINS(r.output, "train-grpo: after training");
  const fs::path out = base_dir() / "verifier";
  for (const char* file : {"final/config.json", "step-2/policy/model.safetensors", "step-2/ppo_state.json", "result.json"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  const auto rows = metrics_rows(out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    // A barely trained model answers most prompts wrong 4 times out of 4: groups of equal rewards,
    // advantage 0 — and no NaN anywhere.
    EXPECT_TRUE(row.contains("frac_reward_zero_std")) << row;
    EXPECT_GT(row.at("frac_reward_zero_std").get<double>(), 0.0) << row;
    for (const char* key : {"loss", "reward/mean", "entropy", "grad_norm/policy"}) {
      ASSERT_TRUE(row.contains(key)) << key << " in " << row;
      EXPECT_TRUE(std::isfinite(row.at(key).get<double>())) << key << " in " << row;
    }
  }
  const nlohmann::json result = result_of(out);
  EXPECT_EQ(result.at("optimizer_steps"), 4);
}

// Rollout by rollout, the metrics of the run in `got` against those in `want`: the `exact` keys
// equal, the `close` keys within 1e-5 (relative above 1).
void expect_same_rollouts(const fs::path& got, const fs::path& want, std::initializer_list<const char*> exact,
                          std::initializer_list<const char*> close = {}) {
  const auto got_rows = metrics_rows(got), want_rows = metrics_rows(want);
  ASSERT_EQ(got_rows.size(), want_rows.size());
  for (size_t i = 0; i < want_rows.size(); ++i) {
    for (const char* key : exact) {
      EXPECT_EQ(got_rows[i].at(key), want_rows[i].at(key)) << key << " at rollout " << i + 1;
    }
    for (const char* key : close) {
      const double expected = want_rows[i].at(key).get<double>();
      EXPECT_NEAR(got_rows[i].at(key).get<double>(), expected, 1e-5 * std::max(1.0, std::abs(expected)))
          << key << " at rollout " << i + 1;
    }
  }
}

void ExampleCommandGivesTheVerifiersRun() {
  ASSERT_TRUE(fs::exists(base_dir() / "verifier" / "metrics.jsonl"));
  const Result r = grpo("command", " "
                                   "--set 'rewards=[{kind: command, command: \"python3 scripts/reward-exact-match.py\"}]'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_rollouts(base_dir() / "command", base_dir() / "verifier", {"reward/mean", "loss", "grad_norm/policy"});
  // A TRL reward function behind docs/data.md's wrapper: it reads the row's columns (gt_answer) and
  // TRL's conversational completion, and gives the same run.
  const Result trl = grpo("trl_function", " --set 'rewards=[{kind: command, command: \"python3 scripts/reward-trl-function.py\"}]'");
  ASSERT_EQ(trl.exit_code, 0) << trl.output;
  expect_same_rollouts(base_dir() / "trl_function", base_dir() / "verifier", {"reward/mean", "loss", "grad_norm/policy"});
}

// generation.max_batch_rows 3: the 16 rows of a rollout decode 3 at a time, the others joining as
// rows end. Each row samples from its own generator, so the rollouts hold the same tokens and the
// run learns what the all-at-once run learnt (log-probabilities may differ in the last bits).
void RowsJoiningGiveTheSameRun() {
  const Result r = grpo("joining", " --set generation.max_batch_rows=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_rollouts(base_dir() / "joining", base_dir() / "verifier", {"reward/mean", "response_length", "ended_fraction"},
                       {"entropy", "loss", "grad_norm/policy"});
}

void BadCommandsEndTheRunNamingCommandAndPrompt() {
  struct Case {
    std::string command, timeout, expected;
  };
  const std::string crash = write_file("crash.sh", "exit 3\n");
  const std::vector<Case> cases{
      {"sh " + crash, "5", "(it exited with status 3)"},
      {"sleep 30", "1", "no answer within 1 s"},
      {"yes hello", "5", "answered 'hello', not a number"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const Result r = grpo("bad" + std::to_string(n++),
                          " --set 'rewards=[{kind: command, command: \"" + c.command + "\", timeout: " + c.timeout + "}]'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_CONTAINS(r.output, "reward command `" + c.command + "`");
    EXPECT_CONTAINS(r.output, c.expected);
    EXPECT_CONTAINS(r.output, "the prompt on line");
    EXPECT_CONTAINS(r.output, "data/prompts_train.jsonl");
  }
}

void CommandFailingLaterLeavesAResumableCheckpoint() {
  // Answers the first rollout's 16 completions, then exits: rollout 2 fails after step-1 was saved.
  const std::string script = write_file("sixteen.py",
                                        "import sys\nfor i, line in enumerate(sys.stdin):\n"
                                        "    if i == 16: sys.exit(1)\n    print(0.5, flush=True)\n");
  const std::string args = " --set train.save_every=1 --set 'rewards=[{kind: command, command: \"python3 " + script + "\"}]'";
  const Result failed = grpo("later", args);
  EXPECT_EQ(failed.exit_code, 2) << failed.output;
  EXPECT_CONTAINS(failed.output, "it ended before answering");
  EXPECT_TRUE(fs::exists(base_dir() / "later" / "step-1" / "policy" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(base_dir() / "later" / "final"));
  const Result resumed = grpo("later", " --set train.resume=auto --set 'rewards=[{kind: verifier}]'");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_CONTAINS(resumed.output, "resumed from");
  EXPECT_TRUE(fs::exists(base_dir() / "later" / "final" / "config.json"));
}

void PpoWithRlooNeedsNoCritic() {
  const fs::path out = base_dir() / "rloo";
  const Result r = run_ferry("train-ppo --config " + grpo_stage() + kQuiet + " --set data.eval_file= --set stage=ppo --set ppo.advantage_estimator=rloo" +
                             " --set ppo.num_generations=4 --set ppo.rollout_batch_size=4 --set output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "advantages: rloo;");
  EXPECT_CONTAINS(r.output, "4 prompts x 4 responses");
  EXPECT_TRUE(fs::exists(out / "final" / "config.json"));
  EXPECT_FALSE(fs::exists(out / "final_critic"));
  EXPECT_FALSE(fs::exists(out / "step-2" / "critic"));
  for (const auto& row : metrics_rows(out)) {
    EXPECT_FALSE(row.contains("value_loss")) << row;
    EXPECT_TRUE(std::isfinite(row.at("policy_loss").get<double>())) << row;
  }
}

// GRPO with beta 0 holds the policy alone; PPO (GAE) on the same model and batch also holds a
// trained critic and a reference. Engine accounting under offload.policy none, from result.json;
// on this CPU run it includes each phase's activations (the activation meter).
void GrpoHoldsLessThanPpo() {
  const fs::path ppo_out = base_dir() / "ppo_memory";
  const Result ppo = run_ferry("train-ppo --config " + grpo_stage() + kQuiet + " --set data.eval_file= --set stage=ppo --set train.max_steps=1" +
                               " --set ppo.critic_model=" + (base_dir() / "sft" / "final").string() +
                               " --set ppo.rollout_batch_size=16 --set output.dir=" + ppo_out.string());
  ASSERT_EQ(ppo.exit_code, 0) << ppo.output;
  const auto ppo_peaks = result_of(ppo_out).at("peak_device_bytes");
  const auto grpo_peaks = result_of(base_dir() / "verifier").at("peak_device_bytes");
  for (const char* phase : {"generate", "score", "learn"}) {
    EXPECT_LT(grpo_peaks.at(phase).get<double>(), ppo_peaks.at(phase).get<double>()) << phase;
  }
  // Learning: policy (weights, gradients, two AdamW moments) vs policy + critic the same, plus the
  // reference's weights: half, and a little more for activations (the policy's forward is the
  // larger part of them in both).
  EXPECT_LT(grpo_peaks.at("learn").get<double>() * 1.8, ppo_peaks.at("learn").get<double>());
  std::cout << "peak device bytes, learning: GRPO " << grpo_peaks.at("learn") << ", PPO " << ppo_peaks.at("learn") << "\n";
}

TEST(GrpoCli, SftThenEachCheck) {
  fs::remove_all(base_dir());
  fs::create_directories(base_dir());
  const std::string pipeline = write_file("pipeline.yaml", "pipeline:\n  stages: [" + sft_stage() + ", " + grpo_stage() + "]\n");
  Result first = run_ferry("pipeline --config " + pipeline + kQuiet);
  pipeline_run_ = &first;
  ASSERT_EQ(first.exit_code, 0) << first.output;
  {
    SCOPED_TRACE("PipelineTrainsCheckpointsAndHasNoNaN");
    PipelineTrainsCheckpointsAndHasNoNaN();
  }
  {
    SCOPED_TRACE("ExampleCommandGivesTheVerifiersRun");
    ExampleCommandGivesTheVerifiersRun();
  }
  {
    SCOPED_TRACE("RowsJoiningGiveTheSameRun");
    RowsJoiningGiveTheSameRun();
  }
  {
    SCOPED_TRACE("BadCommandsEndTheRunNamingCommandAndPrompt");
    BadCommandsEndTheRunNamingCommandAndPrompt();
  }
  {
    SCOPED_TRACE("CommandFailingLaterLeavesAResumableCheckpoint");
    CommandFailingLaterLeavesAResumableCheckpoint();
  }
  {
    SCOPED_TRACE("PpoWithRlooNeedsNoCritic");
    PpoWithRlooNeedsNoCritic();
  }
  {
    SCOPED_TRACE("GrpoHoldsLessThanPpo");
    GrpoHoldsLessThanPpo();
  }
  pipeline_run_ = nullptr;
  fs::remove_all(base_dir());
}

}  // namespace
