// Multi-turn RL as a user runs it (docs/environments.md): `ferry train-grpo` and `train-ppo` from a
// few steps of demo SFT, with scripts/envs/guess_number.py as rollout.environment: the runs train,
// log the episode metrics and evaluate held-out prompts as episodes; an environment that cannot
// start ends the run naming it and its stderr; a reward of kind environment without one is a config
// error; and SIGTERM (once, or twice) leaves no environment process behind.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "ferry_process.h"
#include "tests/run_output.h"

namespace {

using Result = ferry_test::CommandResult;
using ferry_test::run_ferry;

namespace fs = std::filesystem;

const fs::path& base_dir() {
  static const fs::path dir = [] {
    const fs::path d = ferry_test::process_temp_dir("ferry_agent_cli");
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

const std::string& sft_model() {
  static const std::string model = [] {
    const Result r = run_ferry("train-sft --config " + ferry_test::quick_sft_stage(base_dir()) + ferry_test::kQuietCpu);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return (base_dir() / "sft" / "final").string();
  }();
  return model;
}

// The environment command, recording each worker's pid (the shell execs python in its place).
std::string environment(const std::string& pids) {
  return "echo $$ >> " + pids + "; exec python3 scripts/envs/guess_number.py";
}

std::string stage(const std::string& name, const std::string& kind, const std::string& env_command,
                  const std::string& extra = "") {
  return ferry_test::write_text(
      base_dir(), name + ".yaml",
      "stage: " + kind + "\nmodel: {path: " + sft_model() + "}\ntokenizer: {chat_template: demo}\n"
      "data: {prompt_file: data/prompts_train.jsonl, eval_file: data/prompts_eval.jsonl, max_samples: 16, "
      "max_length: 64}\n"
      "generation: {max_new_tokens: 8}\n"
      "train: {micro_batch_size: 4, grad_accumulation: 2, max_steps: 2, learning_rate: 1.0e-4}\n"
      "rollout: {environment: \"" + env_command + "\", max_turns: 3, max_total_tokens: 48}\n" + extra +
      "output: {dir: " + (base_dir() / name).string() + "}\n");
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close + 2 < line.size() && line[close + 2] != 'Z';
}

std::vector<pid_t> read_pids(const fs::path& file) {
  std::vector<pid_t> out;
  std::ifstream in(file);
  for (pid_t pid; in >> pid;) out.push_back(pid);
  return out;
}

void expect_all_gone(const std::vector<pid_t>& pids) {
  for (int i = 0; i < 50; ++i) {
    bool any = false;
    for (pid_t p : pids) any = any || alive(p);
    if (!any) return;
    ::usleep(100 * 1000);
  }
  for (pid_t p : pids) EXPECT_FALSE(alive(p)) << "environment process " << p << " outlived the run";
}

TEST(AgentCli, GrpoWithAnEnvironmentTrainsLogsEpisodesAndEvaluatesThem) {
  const fs::path pids = base_dir() / "grpo.pids";
  const Result r = run_ferry("train-grpo --config " +
                             stage("grpo", "grpo", environment(pids.string()), "grpo: {num_generations: 4, generation_batch_size: 16}\n") +
                             ferry_test::kQuietCpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "rollout: multi-turn episodes against environment `echo $$ >>");
  EXPECT_CONTAINS(r.output, "(tool calls: none, <= 3 turns, <= 48 tokens after the prompt), 2 worker(s)");
  EXPECT_CONTAINS(r.output, "rewards: environment");
  EXPECT_CONTAINS(r.output, "mean environment reward");
  const std::vector<nlohmann::json> rows = ferry_test::metrics_rows(base_dir() / "grpo");
  ASSERT_EQ(rows.size(), 2u);
  for (const nlohmann::json& row : rows) {
    for (const char* key : {"episode/turns", "episode/done_fraction", "episode/env_crash", "time/env_wait",
                            "env/answer_ms", "reward/environment"}) {
      EXPECT_TRUE(row.contains(key)) << key << " in " << row.dump();
    }
    EXPECT_GE(row["episode/turns"].get<double>(), 1.0);
    EXPECT_EQ(row["episode/env_crash"].get<double>(), 0.0);
  }
  const nlohmann::json result = ferry_test::result_figures(base_dir() / "grpo");
  EXPECT_TRUE(result.dump().find("mean_env_reward") != std::string::npos) << result.dump();
  const std::vector<pid_t> started = read_pids(pids);
  EXPECT_EQ(started.size(), 2u);
  expect_all_gone(started);
}

TEST(AgentCli, PpoMixesTheEnvironmentsRewardWithAVerifier) {
  const Result r = run_ferry(
      "train-ppo --config " +
      stage("ppo", "ppo", environment((base_dir() / "ppo.pids").string()),
            "ppo: {advantage_estimator: rloo, num_generations: 2, rollout_batch_size: 4}\n"
            "rewards: [{kind: environment}, {kind: verifier, weight: 0.5}]\n") +
      ferry_test::kQuietCpu);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "rewards: environment + verifier (exact) x 0.5");
  const std::vector<nlohmann::json> rows = ferry_test::metrics_rows(base_dir() / "ppo");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].contains("reward/environment") && rows[0].contains("reward/verifier")) << rows[0].dump();
  expect_all_gone(read_pids(base_dir() / "ppo.pids"));
}

TEST(AgentCli, AnEnvironmentThatCannotStartEndsTheRunNamingIt) {
  const Result r = run_ferry("train-grpo --config " +
                             stage("broken", "grpo", "echo no such module: gymnasium >&2; exit 1",
                                   "grpo: {num_generations: 4, generation_batch_size: 16}\n") +
                             ferry_test::kQuietCpu + " --set data.eval_file=");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "rollout.environment `echo no such module: gymnasium >&2; exit 1`");
  EXPECT_CONTAINS(r.output, "ended before answering any request");
  EXPECT_CONTAINS(r.output, "no such module: gymnasium");
}

TEST(AgentCli, AnEnvironmentRewardNeedsAnEnvironment) {
  const Result r = run_ferry("train-grpo --config configs/demo-grpo.yaml --set 'rewards=[{kind: environment}]'" +
                             ferry_test::kQuietCpu);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "rewards[0] is kind environment: set rollout.environment");
}

// SIGTERM once: the rollout finishes, a checkpoint is saved, the environment processes end with
// the run. Twice: Ferry dies at once, and its handler kills them first.
TEST(AgentCli, SigtermLeavesNoEnvironmentProcessBehind) {
  for (const int signals : {1, 2}) {
    SCOPED_TRACE(std::to_string(signals) + " SIGTERM(s)");
    const std::string name = "sigterm" + std::to_string(signals);
    const fs::path pids = base_dir() / (name + ".pids");
    const std::string args = "train-grpo --config " +
                             stage(name, "grpo", environment(pids.string()),
                                   "grpo: {num_generations: 4, generation_batch_size: 16}\n") +
                             ferry_test::kQuietCpu + " --set data.eval_file= --set train.max_steps=100000";
    const fs::path log = base_dir() / (name + ".log");
    const pid_t child = ferry_test::start_ferry(args, log.string());
    ASSERT_GE(child, 0);
    const fs::path metrics = base_dir() / name / "metrics.jsonl";
    for (int i = 0; i < 600 && ferry_test::count_lines_with(metrics.string(), "\"step\"") < 1; ++i) ::usleep(100 * 1000);
    ASSERT_GE(ferry_test::count_lines_with(metrics.string(), "\"step\""), 1) << ferry_test::read_text(log.string());
    const std::vector<pid_t> started = read_pids(pids);
    ASSERT_EQ(started.size(), 2u);
    for (pid_t p : started) EXPECT_TRUE(alive(p));
    if (signals == 2) {
      ::kill(child, SIGTERM);
      ::usleep(200 * 1000);  // the first is handled (a stop is asked) before the second arrives
    }
    const std::optional<int> stopped = ferry_test::stop_ferry(child, SIGTERM);
    ASSERT_TRUE(stopped.has_value());
    if (signals == 1) {
      ASSERT_TRUE(WIFEXITED(*stopped)) << ferry_test::read_text(log.string());
      EXPECT_EQ(WEXITSTATUS(*stopped), 128 + SIGTERM);
    }
    expect_all_gone(started);
  }
}

}  // namespace
