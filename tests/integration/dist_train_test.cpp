// Data-parallel training on c10d Gloo, as a user runs it (`ferry launch`, or the torchrun
// environment set by hand), on the CPU: 2 processes with grad_accumulation 1 take the steps of one
// process with grad_accumulation 2 (same global batch) under every offload policy and ZeRO stages
// 0, 1, 2 and 3; checkpoints of either resume on the other (ZeRO's sharded ones too); train-rm and train-dpo likewise; rank 0 alone writes; a signal to one process stops both with a
// checkpoint; a killed process stops the run with a message naming it instead of a hang; train-ppo
// and train-grpo share their rollouts and take one process's steps too (DiLoCo is refused there).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/dist/launcher.h"
#include "tests/integration/ferry_process.h"

namespace {

namespace fs = std::filesystem;
using ferry_test::run_ferry;

const fs::path& test_dir() {
  static const fs::path dir = [] {
    const fs::path d = ferry_test::process_temp_dir("ferry_dist");
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// 6 steps of SFT of the demo-shaped model from scratch, fp32, checkpoints at 3 and 6.
std::string config() {
  static const std::string path = ferry_test::write_text(
      test_dir(), "dist_sft.yaml",
      "stage: sft\nmodel: {config: configs/demo-model.json}\n"
      "tokenizer: {path: data/tokenizer.model, chat_template: demo}\n"
      "data: {train_file: data/sft_train.jsonl, eval_file: data/sft_eval.jsonl, max_samples: 200, max_length: 64}\n"
      "train: {micro_batch_size: 4, max_steps: 6, save_every: 3, eval_every: 3, learning_rate: 1.0e-3, "
      "warmup_steps: 2, device: cpu}\n"
      "output: {keep_last: 0}\nlogging: {progress: never, tensorboard: false}\n");
  return path;
}

struct Row {
  double loss = 0, grad_norm = 0;
};

std::vector<Row> rows_of(const fs::path& run) {
  std::vector<Row> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("loss") && row.contains("grad_norm")) {
      out.push_back({row.at("loss").get<double>(), row.at("grad_norm").get<double>()});
    }
  }
  return out;
}

std::vector<double> eval_losses_of(const fs::path& run) {
  std::vector<double> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("eval_loss")) out.push_back(row.at("eval_loss").get<double>());
  }
  return out;
}

// Runs `ferry ARGS` (through `launch --nproc N --` when N > 1) into test_dir()/name.
fs::path train(const std::string& name, int nproc, int accumulation, const std::string& extra = "") {
  const fs::path out = test_dir() / name;
  const std::string sft = "train-sft --config " + config() + " --set output.dir=" + out.string() +
                          " --set train.grad_accumulation=" + std::to_string(accumulation) + extra;
  const auto r = run_ferry(nproc > 1 ? "launch --nproc " + std::to_string(nproc) + " -- " + sft : sft);
  EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.output;
  return out;
}

void expect_same_steps(const std::vector<Row>& a, const std::vector<Row>& b, size_t first_step,
                       const std::string& what) {
  ASSERT_EQ(a.size() - first_step, b.size()) << what;
  for (size_t i = 0; i < b.size(); ++i) {
    const Row& x = a[first_step + i];
    EXPECT_NEAR(b[i].loss, x.loss, 1e-5 * x.loss) << what << ", step " << first_step + i + 1;
    EXPECT_NEAR(b[i].grad_norm, x.grad_norm, 1e-5 * x.grad_norm) << what << ", step " << first_step + i + 1;
  }
}

// A new run folder test_dir()/name holding a copy of `checkpoint` (its step-N folder), for a run
// that resumes from it.
fs::path run_from(const fs::path& checkpoint, const std::string& name) {
  const fs::path out = test_dir() / name;
  fs::create_directories(out);
  fs::copy(checkpoint, out / checkpoint.filename(), fs::copy_options::recursive);
  return out;
}

// Skips the calling test when this Ferry was built without Gloo (single-process only).
#define SKIP_WITHOUT_GLOO()                                                                      \
  if (run_ferry("version").output.find("data parallelism: c10d Gloo") == std::string::npos) {    \
    GTEST_SKIP() << "[needs gloo] built without the Gloo headers (apt-get install libgloo-dev)"; \
  }

const std::vector<Row>& single() {
  static const std::vector<Row> rows = rows_of(train("single", 1, 2));
  return rows;
}

TEST(DistTrain, TwoProcessesTakeTheStepsOfOneWithTheSameGlobalBatch) {
  SKIP_WITHOUT_GLOO();
  ASSERT_EQ(single().size(), 6u);
  EXPECT_LT(single().back().loss, single().front().loss);
  for (const char* policy : {"none", "optimizer", "params"}) {
    const fs::path run = train(std::string("two_") + policy, 2, 1, std::string(" --set offload.policy=") + policy);
    expect_same_steps(single(), rows_of(run), 0, std::string("2 processes under ") + policy);
    // Evaluation is shared between the processes and summed: the same eval losses (steps 3 and 6),
    // to fp32 rounding: each process's eval batches have other shapes than the single process's, and
    // on some CPUs (AVX-512 GEMMs) a row's fp32 result depends on the batch's (seen: 6.7e-9 apart on an
    // Xeon, 0 on an AVX2 EPYC). A wrong share or sum moves the loss by far more than 1e-6.
    const std::vector<double> eval_one = eval_losses_of(test_dir() / "single"), eval_two = eval_losses_of(run);
    ASSERT_EQ(eval_one.size(), 2u);
    ASSERT_EQ(eval_two.size(), 2u) << policy;
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(eval_two[i], eval_one[i], 1e-6 * eval_one[i]) << policy;
    EXPECT_TRUE(fs::exists(run / "final" / "model.safetensors")) << policy;
    EXPECT_TRUE(fs::exists(run / "step-3" / "trainer_state.json")) << policy;
  }
}

TEST(DistTrain, RewardModelAndDpoTakeTheStepsOfOneProcessToo) {
  SKIP_WITHOUT_GLOO();
  const auto sft = run_ferry("train-sft --config " + ferry_test::quick_sft_stage(test_dir()) + ferry_test::kQuietCpu);
  ASSERT_EQ(sft.exit_code, 0) << sft.output;
  for (const std::string stage : {"rm", "dpo"}) {
    // 1 process, then 2 (ZeRO 0), then 2 with ZeRO 3 and paged weights (DPO's reference pass and
    // the reward model's evaluation page collectively too).
    std::vector<std::vector<Row>> runs;
    for (const int run : {1, 2, 3}) {
      const int nproc = run == 1 ? 1 : 2;
      const fs::path out = test_dir() / (stage + std::to_string(run));
      const std::string args = "train-" + stage + " --config configs/demo-" + stage + ".yaml --set model.path=" +
                               (test_dir() / "sft" / "final").string() + " --set output.dir=" + out.string() +
                               " --set train.max_steps=4 --set train.micro_batch_size=4 --set train.save_every=0"
                               " --set data.eval_file= --set train.grad_accumulation=" + std::to_string(2 / nproc) +
                               (run == 3 ? " --set distributed.zero_stage=3 --set offload.policy=params" : "") +
                               ferry_test::kQuietCpu;
      const auto r = run_ferry(nproc > 1 ? "launch --nproc 2 -- " + args : args);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      runs.push_back(rows_of(out));
    }
    ASSERT_EQ(runs[0].size(), 4u) << stage;
    expect_same_steps(runs[0], runs[1], 0, "train-" + stage + " on 2 processes");
    expect_same_steps(runs[0], runs[2], 0, "train-" + stage + " on 2 processes with ZeRO 3 under params");
  }
}

// An RL rollout's figures: the loss, the policy's gradient norm and the mean reward.
struct RlRow {
  double loss = 0, grad_norm = 0, reward = 0;
};

std::vector<RlRow> rl_rows_of(const fs::path& run) {
  std::vector<RlRow> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("grad_norm/policy")) {
      out.push_back({row.at("loss").get<double>(), row.at("grad_norm/policy").get<double>(),
                     row.at("reward/mean").get<double>()});
    }
  }
  return out;
}

// Each process scores its rollout rows on its own padding, so the values differ from one
// process's in their last bits, and AdamW carries that on: 1e-4 relative (plus 1e-7 for losses
// near 0) where the trainer's stages agree to 1e-5.
void expect_same_rollouts(const std::vector<RlRow>& a, const std::vector<RlRow>& b, size_t first, const std::string& what) {
  ASSERT_EQ(a.size() - first, b.size()) << what;
  for (size_t i = 0; i < b.size(); ++i) {
    const RlRow& x = a[first + i];
    const std::string at = what + ", rollout " + std::to_string(first + i + 1);
    EXPECT_NEAR(b[i].loss, x.loss, 1e-4 * std::abs(x.loss) + 1e-7) << at;
    EXPECT_NEAR(b[i].grad_norm, x.grad_norm, 1e-4 * x.grad_norm) << at;
    EXPECT_NEAR(b[i].reward, x.reward, 1e-5 * std::abs(x.reward)) << at;
  }
}

// PPO and GRPO: each process generates and scores its share of a rollout's rows (each row drawing
// from its own generator, so the samples are one process's), then every process learns from the
// gathered whole, each running its share of each minibatch's micro-batches. 2 processes with
// grad_accumulation 1 take the rollouts of one with 2 (with sampling), under ZeRO 0, 2 and 3; a
// 2-process checkpoint resumes on one process.
TEST(DistTrain, PpoAndGrpoTakeTheRolloutsOfOneProcess) {
  SKIP_WITHOUT_GLOO();
  const fs::path sft = test_dir() / "sft" / "final", rm = test_dir() / "rm" / "final";
  ASSERT_EQ(run_ferry("train-sft --config " + ferry_test::quick_sft_stage(test_dir()) + ferry_test::kQuietCpu).exit_code, 0);
  const auto made_rm = run_ferry("train-rm --config configs/demo-rm.yaml --set model.path=" + sft.string() +
                                 " --set output.dir=" + (test_dir() / "rm").string() +
                                 " --set train.max_steps=3 --set data.eval_file= --set data.max_samples=64" +
                                 ferry_test::kQuietCpu);
  ASSERT_EQ(made_rm.exit_code, 0) << made_rm.output;
  const std::string common = " --set model.path=" + sft.string() +
                             " --set data.max_samples=32 --set data.max_length=64 --set data.eval_file=" +
                             " --set generation.max_new_tokens=8 --set train.micro_batch_size=2 --set train.max_steps=2" +
                             " --set train.learning_rate=1.0e-4 --set train.save_every=1" + ferry_test::kQuietCpu;
  const std::string ppo = "train-ppo --config configs/demo-ppo.yaml --set ppo.reward_model=" + rm.string() +
                          " --set ppo.rollout_batch_size=8" + common;
  const std::string grpo = "train-grpo --config configs/demo-grpo.yaml --set grpo.num_generations=4"
                           " --set grpo.generation_batch_size=8 --set grpo.beta=0.04 --set grpo.num_iterations=2"
                           " --set 'rewards=[{kind: model, path: " + rm.string() + "}, {kind: verifier, weight: 0.5}]'" + common;
  auto run = [&](const std::string& args, const std::string& name, int nproc, const std::string& extra = "") {
    const fs::path out = test_dir() / name;
    const std::string line = args + " --set output.dir=" + out.string() +
                             " --set train.grad_accumulation=" + std::to_string(2 / nproc) + extra;
    const auto r = run_ferry(nproc > 1 ? "launch --nproc 2 -- " + line : line);
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    return out;
  };
  const std::vector<RlRow> ppo_one = rl_rows_of(run(ppo, "ppo1", 1));
  ASSERT_EQ(ppo_one.size(), 2u);
  expect_same_rollouts(ppo_one, rl_rows_of(run(ppo, "ppo2", 2)), 0, "train-ppo on 2 processes");
  const fs::path zero3 = run(ppo, "ppo2_zero3", 2, " --set distributed.zero_stage=3 --set offload.policy=params");
  expect_same_rollouts(ppo_one, rl_rows_of(zero3), 0, "train-ppo on 2 processes with ZeRO 3 under params");
  EXPECT_TRUE(fs::exists(zero3 / "step-1" / "optimizer_state.shard-1-of-2.safetensors"));
  EXPECT_TRUE(fs::exists(zero3 / "final_critic" / "model.safetensors"));
  // The ZeRO 3 checkpoint after rollout 1, resumed by one process.
  const fs::path resumed = run_from(zero3 / "step-1", "ppo1_from_zero3");
  run(ppo, "ppo1_from_zero3", 1, " --set train.resume=auto");
  expect_same_rollouts(ppo_one, rl_rows_of(resumed), 1, "train-ppo on 1 process from a 2-process ZeRO 3 checkpoint");

  const std::vector<RlRow> grpo_one = rl_rows_of(run(grpo, "grpo1", 1));
  ASSERT_EQ(grpo_one.size(), 2u);
  expect_same_rollouts(grpo_one, rl_rows_of(run(grpo, "grpo2", 2, " --set distributed.zero_stage=2")), 0,
                       "train-grpo on 2 processes with ZeRO 2");
}

TEST(DistTrain, CheckpointsResumeAtAnotherProcessCount) {
  SKIP_WITHOUT_GLOO();
  ASSERT_EQ(single().size(), 6u);
  // A 2-process checkpoint, resumed by one process (accumulation 2)...
  const fs::path two = train("resume_two", 2, 1);
  const fs::path one_from_two = run_from(two / "step-3", "one_from_two");
  train("one_from_two", 1, 2, " --set train.resume=auto");
  expect_same_steps(single(), rows_of(one_from_two), 3, "1 process resuming a 2-process checkpoint");
  // ... and a 1-process checkpoint resumed by two.
  const fs::path two_from_one = run_from(test_dir() / "single" / "step-3", "two_from_one");
  train("two_from_one", 2, 1, " --set train.resume=auto");
  expect_same_steps(single(), rows_of(two_from_one), 3, "2 processes resuming a 1-process checkpoint");
}

TEST(DistTrain, ZeroStagesTakeTheStepsOfOneProcess) {
  SKIP_WITHOUT_GLOO();
  ASSERT_EQ(single().size(), 6u);
  for (const char* policy : {"none", "optimizer", "params"}) {
    for (const char* stage : {"1", "2", "3"}) {
      if (std::string(policy) == "none" && std::string(stage) == "3") continue;  // needs the chunked engine
      const std::string what = std::string("2 processes, zero_stage ") + stage + " under " + policy;
      const fs::path run = train(std::string("zero") + stage + "_" + policy, 2, 1,
                                 std::string(" --set offload.policy=") + policy + " --set distributed.zero_stage=" + stage);
      expect_same_steps(single(), rows_of(run), 0, what);
      // Each process saved its shard of the optimizer state into the checkpoint.
      EXPECT_TRUE(fs::exists(run / "step-3" / "optimizer_state.shard-0-of-2.safetensors")) << what;
      EXPECT_TRUE(fs::exists(run / "step-3" / "optimizer_state.shard-1-of-2.safetensors")) << what;
      EXPECT_FALSE(fs::exists(run / "step-3" / "optimizer_state.safetensors")) << what;
    }
  }
}

// LoRA: the frozen base shares each layer's chunk with the adapters; only the adapters' new values
// are sent, and the base stays intact on every process.
TEST(DistTrain, ZeroWithLoraTakesTheStepsOfOneProcess) {
  SKIP_WITHOUT_GLOO();
  const std::string lora = " --set lora.rank=4 --set lora.target_modules=[q_proj,v_proj,up_proj]";
  const std::vector<Row> one = rows_of(train("lora_single", 1, 2, lora));
  ASSERT_EQ(one.size(), 6u);
  for (const char* stage : {"1", "3"}) {
    const std::string settings = lora + " --set offload.policy=" + (std::string(stage) == "3" ? "params" : "optimizer") +
                                 " --set distributed.zero_stage=" + stage;
    expect_same_steps(one, rows_of(train(std::string("lora_zero") + stage, 2, 1, settings)), 0,
                      std::string("LoRA, 2 processes, zero_stage ") + stage);
  }
}

TEST(DistTrain, ZeroShardedCheckpointsResumeAtAnotherProcessCount) {
  SKIP_WITHOUT_GLOO();
  ASSERT_EQ(single().size(), 6u);
  const std::string zero = " --set distributed.zero_stage=2 --set offload.policy=optimizer";
  // Two shards, resumed by one process ...
  const fs::path two = train("zero_resume_two", 2, 1, zero);
  const fs::path one_from_two = run_from(two / "step-3", "zero_one_from_two");
  train("zero_one_from_two", 1, 2, " --set train.resume=auto --set offload.policy=optimizer");
  expect_same_steps(single(), rows_of(one_from_two), 3, "1 process resuming a ZeRO-2 checkpoint of 2");
  // ... and one process's whole state, sharded on resume by two.
  const fs::path two_from_one = run_from(test_dir() / "single" / "step-3", "zero_two_from_one");
  train("zero_two_from_one", 2, 1, " --set train.resume=auto" + zero);
  expect_same_steps(single(), rows_of(two_from_one), 3, "2 ZeRO-2 processes resuming a 1-process checkpoint");
}

std::vector<double> comm_bytes_of(const fs::path& run) {
  std::vector<double> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("comm_bytes") && row.contains("grad_norm")) out.push_back(row.at("comm_bytes").get<double>());
  }
  return out;
}

TEST(DistTrain, DiLoCoSynchronisesEveryInnerStepsAndResumesExactly) {
  SKIP_WITHOUT_GLOO();
  ASSERT_EQ(single().size(), 6u);
  // With outer momentum, so that the resume has momentum to restore.
  const std::string diloco = " --set distributed.mode=diloco --set distributed.inner_steps=3"
                             " --set distributed.outer_lr=0.7 --set distributed.outer_momentum=0.9";
  const fs::path run = train("diloco", 2, 1, diloco);
  const std::vector<Row> rows = rows_of(run);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_LT(rows.back().loss, rows.front().loss);
  // Steps 1 and 2 send only the step's loss sums; step 3 also sends the fp32 pseudo-gradient: 4
  // bytes per weight, about the size of the fp32 model file (what a sync step sends every step).
  const std::vector<double> sent = comm_bytes_of(run);
  ASSERT_EQ(sent.size(), 6u);
  EXPECT_LT(sent[0], 100.0);
  EXPECT_LT(sent[1], 100.0);
  const double model_bytes = static_cast<double>(fs::file_size(run / "final" / "model.safetensors"));
  EXPECT_NEAR(sent[2], model_bytes, 0.01 * model_bytes);
  const std::vector<double> sent_sync = comm_bytes_of(test_dir() / "single");
  EXPECT_TRUE(sent_sync.empty()) << "one process communicates nothing";
  EXPECT_TRUE(fs::exists(run / "step-3" / "diloco_state.safetensors"));
  EXPECT_TRUE(fs::exists(run / "step-3" / "diloco-rank-1" / "optimizer_state.safetensors"));
  // Resumed from step 3 on 2 processes: steps 4..6 as the run that never stopped.
  const fs::path resumed = run_from(run / "step-3", "diloco_resumed");
  train("diloco_resumed", 2, 1, diloco + " --set train.resume=auto");
  expect_same_steps(rows, rows_of(resumed), 3, "DiLoCo resumed at step 3");
  // A checkpoint of a run without DiLoCo (one process, sync) starts DiLoCo from its weights.
  const fs::path switched = run_from(test_dir() / "single" / "step-3", "diloco_from_sync");
  const auto r = run_ferry("launch --nproc 2 -- train-sft --config " + config() + " --set output.dir=" +
                           switched.string() + " --set train.grad_accumulation=1 --set train.resume=auto" + diloco);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DiLoCo starts here, from its weights"), std::string::npos) << r.output;
  EXPECT_EQ(rows_of(switched).size(), 3u);
  // int8 pseudo-gradients: about a quarter of the bytes at the synchronisation.
  const fs::path int8 = train("diloco_int8", 2, 1, diloco + " --set distributed.pseudo_gradient=int8");
  const std::vector<double> sent_int8 = comm_bytes_of(int8);
  ASSERT_EQ(sent_int8.size(), 6u);
  EXPECT_LT(sent_int8[2], 0.26 * sent[2]);
  EXPECT_GT(sent_int8[2], 0.24 * sent[2]);
}

TEST(DistTrain, DiLoCoCheckpointsMustFallOnSynchronisations) {
  const auto r = run_ferry("train-sft --config " + config() + " --set distributed.mode=diloco --set distributed.inner_steps=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.save_every (3) a multiple of distributed.inner_steps (2)"), std::string::npos) << r.output;
}

// Starts `ferry ARGS` as one rank of a 2-process group by the torchrun environment; its pid.
pid_t start_rank(int rank, int port, const std::string& args, const fs::path& log) {
  const std::string env = "RANK=" + std::to_string(rank) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(rank) +
                          " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string command = std::string("cd '") + FERRY_SOURCE_DIR + "' && exec env " + env + " '" +
                                FERRY_BINARY + "' " + args + " > '" + log.string() + "' 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return child;
}

// The exit status of `child` once it ends within `seconds`, else nullopt (it is then killed).
std::optional<int> wait_for(pid_t child, double seconds) {
  int status = 0;
  for (int i = 0; i < seconds * 10; ++i) {
    if (::waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return std::nullopt;
}

TEST(DistTrain, AKilledProcessStopsTheOthersWithAMessageInsteadOfAHang) {
  SKIP_WITHOUT_GLOO();
  const fs::path out = test_dir() / "killed";
  const std::string args = "train-sft --config " + config() + " --set output.dir=" + out.string() +
                           " --set train.max_steps=100000 --set train.save_every=0 --set distributed.timeout=20";
  const int port = static_cast<int>(ferry::dist::free_port("127.0.0.1"));
  const pid_t rank0 = start_rank(0, port, args, test_dir() / "rank0.log");
  const pid_t rank1 = start_rank(1, port, args, test_dir() / "rank1.log");
  // Once the run is under way (rank 0 has logged two steps), rank 1 dies.
  for (int i = 0; i < 600 && ferry_test::count_lines_with((out / "metrics.jsonl").string(), "\"loss\"") < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(ferry_test::count_lines_with((out / "metrics.jsonl").string(), "\"loss\""), 2)
      << ferry_test::read_text((test_dir() / "rank0.log").string());
  ::kill(rank1, SIGKILL);
  ::waitpid(rank1, nullptr, 0);
  const auto started = std::chrono::steady_clock::now();
  const std::optional<int> code = wait_for(rank0, 40);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string log = ferry_test::read_text((test_dir() / "rank0.log").string());
  ASSERT_TRUE(code.has_value()) << "rank 0 hung after rank 1 died:\n" << log;
  EXPECT_EQ(*code, 1) << log;
  EXPECT_LE(seconds, 25.0) << "within distributed.timeout (20 s)";
  EXPECT_CONTAINS(log, "rank 0 of 2");
  EXPECT_CONTAINS(log, "another process of this run stopped or did not answer within distributed.timeout (20 s)");
  std::cout << "rank 0 stopped " << seconds << " s after rank 1 was killed:\n" << log.substr(log.rfind("error:")) << "\n";
}

TEST(DistTrain, ASignalToOneProcessStopsBothAfterTheStepWithACheckpoint) {
  SKIP_WITHOUT_GLOO();
  const fs::path out = test_dir() / "signalled";
  const std::string args = "train-sft --config " + config() + " --set output.dir=" + out.string() +
                           " --set train.max_steps=100000 --set train.save_every=0 --set distributed.timeout=30";
  const int port = static_cast<int>(ferry::dist::free_port("127.0.0.1"));
  const pid_t rank0 = start_rank(0, port, args, test_dir() / "signal0.log");
  const pid_t rank1 = start_rank(1, port, args, test_dir() / "signal1.log");
  for (int i = 0; i < 600 && ferry_test::count_lines_with((out / "metrics.jsonl").string(), "\"loss\"") < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(rank1, SIGTERM);  // rank 1 alone gets the signal
  const std::optional<int> code0 = wait_for(rank0, 40), code1 = wait_for(rank1, 40);
  const std::string log = ferry_test::read_text((test_dir() / "signal0.log").string());
  ASSERT_TRUE(code0.has_value() && code1.has_value()) << log;
  EXPECT_EQ(*code0, 128 + SIGTERM) << log;
  EXPECT_EQ(*code1, 128 + SIGTERM);
  EXPECT_CONTAINS(log, "stopped by signal 15 after step");
  int checkpoints = 0;
  for (const auto& entry : fs::directory_iterator(out)) {
    if (entry.path().filename().string().rfind("step-", 0) == 0) {
      ++checkpoints;
      EXPECT_TRUE(fs::exists(entry.path() / "trainer_state.json"));
    }
  }
  EXPECT_EQ(checkpoints, 1) << "rank 0 saves the step both stopped after";
}

TEST(DistTrain, LaunchNamesTheProcessThatFailedAndRefusesWhatCannotRunDataParallel) {
  SKIP_WITHOUT_GLOO();
  const auto bad = run_ferry("launch --nproc 2 -- train-sft --config " + config() +
                             " --set output.dir=" + (test_dir() / "bad").string() + " --set train.max_steps=0x");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_CONTAINS(bad.output, "ferry launch: rank ");
  EXPECT_CONTAINS(bad.output, "exited with code 2");
  const auto ppo = run_ferry("launch --nproc 2 -- train-ppo --config configs/demo-ppo.yaml --set output.dir=" +
                             (test_dir() / "ppo").string() + " --set distributed.mode=diloco");
  EXPECT_EQ(ppo.exit_code, 2) << ppo.output;
  EXPECT_CONTAINS(ppo.output, "distributed.mode: train-ppo runs data-parallel with a synchronous step only");
  const auto uneven = run_ferry("launch --nproc 2 -- train-grpo --config configs/demo-grpo.yaml --set output.dir=" +
                                (test_dir() / "grpo").string() + " --set grpo.num_generations=3" +
                                " --set grpo.generation_batch_size=9");
  EXPECT_EQ(uneven.exit_code, 2) << uneven.output;
  EXPECT_CONTAINS(uneven.output, "grpo.generation_batch_size: a rollout of 9 responses does not split evenly over 2");
  // Each process gets its share of the cores as its threads (as torchrun does), unless
  // OMP_NUM_THREADS says otherwise.
  const auto with_threads = [](const std::string& setting) {
    return ferry_test::run_command(std::string("cd '") + FERRY_SOURCE_DIR + "' && " + setting + " '" + FERRY_BINARY +
                                   "' launch --nproc 2 -- version");
  };
  const auto threads = with_threads("env -u OMP_NUM_THREADS");
  ASSERT_EQ(threads.exit_code, 0) << threads.output;
  const unsigned share = std::max(1u, std::thread::hardware_concurrency() / 2);
  EXPECT_CONTAINS(threads.output, "OMP_NUM_THREADS=" + std::to_string(share) + " for each process");
  EXPECT_CONTAINS(threads.output, "cpu threads: " + std::to_string(share) + " (");
  const std::string mine = share == 1 ? "2" : "1";  // not what launch would choose
  const auto chosen = with_threads("env OMP_NUM_THREADS=" + mine);
  EXPECT_CONTAINS(chosen.output, "cpu threads: " + mine + " (");
  EXPECT_EQ(chosen.output.find("for each process"), std::string::npos) << chosen.output;
  const auto none = run_ferry("launch --nproc 2");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_CONTAINS(none.output, "nothing to run");
}

}  // namespace
