// PPO's stage on tiny random models: the scoring phase's masks against a per-sequence loop without
// padding (left-padded prompts; a response ending in EOS mid-batch, one hitting max length, one
// that is EOS alone), dropping non-finite rows, score shaping, four models under one device budget
// (params vs none: same losses, each phase's peak within the budget), and an exact resume.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "core/config/config_io.h"
#include "core/file_util.h"
#include "offload/engine.h"
#include "src/io/hf_checkpoint.h"
#include "src/model/attention_mask.h"
#include "src/model/model_heads.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/tokenizer.h"
#include "stages/ppo.h"
#include "stages/stage_registry.h"
#include "tests/run_output.h"
#include "tests/support/tiny_llama_config.h"
#include "train/rl/advantages.h"
#include "train/rl/policy_losses.h"
#include "train/rl/rollout_advantages.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

ModelShape tiny_shape() {
  ModelShape c = test_support::tiny_llama_config({.vocab_size = 2000,  // data/tokenizer.model's
                                                   .hidden_size = 32,
                                                   .intermediate_size = 64,
                                                   .num_attention_heads = 2});
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.pad_token_id = 3;
  return c;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ferry_ppo_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A policy folder and a reward-model folder of tiny random models, made once.
struct Folders {
  fs::path root = fresh_dir("models");
  fs::path policy = root / "policy", reward = root / "reward";
  Folders() {
    const ModelShape shape = tiny_shape();
    CausalLM lm(shape);
    init_model_weights(*lm, shape, 0.2, 11);
    save_pretrained(*lm, shape, policy);
    ScoreModel rm(shape);
    init_model_weights(*rm, shape, 0.2, 12);
    save_pretrained(*rm, shape, reward);
  }
  ~Folders() { fs::remove_all(root); }
};

const Folders& folders() {
  static const Folders f;
  return f;
}

std::string source(const std::string& relative) { return (fs::path(FERRY_SOURCE_DIR) / relative).string(); }

// --- masks ------------------------------------------------------------------------------------

TEST(PpoExperience, ScoringMatchesAPerSequenceLoopWithoutPadding) {
  torch::manual_seed(0);
  const ModelShape shape = tiny_shape();
  CausalLM policy = causal_lm_from_pretrained(folders().policy);
  CausalLM reference(shape);
  init_model_weights(*reference, shape, 0.2, 21);
  ScoreModel critic(shape), reward = score_model_from_pretrained(folders().reward);
  init_model_weights(*critic, shape, 0.2, 22);
  auto engine = offload::make_parameter_engine(offload::EngineOptions{});
  engine->add_model("policy", offload::group_parameters(*policy, false), true);
  engine->add_model("reference", offload::group_parameters(*reference, false), false);
  engine->add_model("critic", offload::group_parameters(*critic, false), true);
  engine->add_model("reward", offload::group_parameters(*reward, false), false);
  const Tokenizer tokenizer(source("data/tokenizer.model"));
  rl::RolloutModels models;
  models.policy = policy.get();
  models.reference = reference.get();
  models.critic = critic.get();
  models.reward = reward.get();
  rl::ExperienceOptions options;
  options.micro_batch_size = 3;  // two scoring micro-batches over four rows
  options.pad_id = 3;
  options.generate.sampling.greedy = false;
  options.generate.sampling.temperature = 0.8;
  rl::ExperienceMaker maker(*engine, models, options, tokenizer);

  // Prompts of 5, 3, 4 and 2 tokens, left-padded to 5; responses of R = 5 columns:
  //   row 0 ends with EOS (2) at its 3rd token, row 1 hits max length, row 2 is EOS alone,
  //   row 3 ends with EOS at its 4th token. Pad (3) fills the rest.
  const std::vector<std::vector<int64_t>> prompt_ids{{1, 40, 41, 42, 43}, {1, 50, 51}, {1, 60, 61, 62}, {1, 70}};
  const std::vector<std::vector<int64_t>> response_ids{{80, 81, 2}, {90, 91, 92, 93, 94}, {2}, {100, 101, 102, 2}};
  const int64_t p = 5, r = 5, rows = 4;
  rl::Experience e;
  e.prompt_length = p;
  e.sequences = torch::full({rows, p + r}, 3, torch::kLong);
  e.attention_mask = torch::zeros({rows, p + r}, torch::kLong);
  e.response_mask = torch::zeros({rows, r});
  for (int64_t i = 0; i < rows; ++i) {
    const auto& prompt = prompt_ids[static_cast<size_t>(i)];
    const auto& response = response_ids[static_cast<size_t>(i)];
    const int64_t lp = static_cast<int64_t>(prompt.size()), lr = static_cast<int64_t>(response.size());
    for (int64_t j = 0; j < lp; ++j) e.sequences[i][p - lp + j] = prompt[static_cast<size_t>(j)];
    e.attention_mask[i].narrow(0, p - lp, lp).fill_(1);
    for (int64_t j = 0; j < lr; ++j) e.sequences[i][p + j] = response[static_cast<size_t>(j)];
    e.attention_mask[i].narrow(0, p, lr).fill_(1);
    e.response_mask[i].narrow(0, 0, lr).fill_(1);
  }
  maker.score(e);
  ASSERT_TRUE(e.ref_logprobs.defined() && e.values.defined() && e.raw_scores.defined());
  e.scores = e.raw_scores;
  PpoConfig settings;
  settings.whiten_advantages = false;  // whitening mixes rows; compare the per-row recursion
  settings.gamma = 0.9;
  settings.lam = 0.8;
  const torch::Tensor kl = rl::estimate_advantages(e, settings, 0.1);

  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < rows; ++i) {
    const auto& prompt = prompt_ids[static_cast<size_t>(i)];
    const auto& response = response_ids[static_cast<size_t>(i)];
    const int64_t lp = static_cast<int64_t>(prompt.size()), lr = static_cast<int64_t>(response.size());
    std::vector<int64_t> all = prompt;
    all.insert(all.end(), response.begin(), response.end());
    const torch::Tensor ids = torch::tensor(all, torch::kLong).unsqueeze(0);  // (1, lp + lr), no padding
    const torch::Tensor targets = ids.narrow(1, lp, lr);
    auto logprobs_of = [&](CausalLMImpl& m) {
      const torch::Tensor log_p = torch::log_softmax(m.forward(ids).narrow(1, lp - 1, lr).to(torch::kFloat) / 0.8, -1);
      return log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1).squeeze(0);
    };
    const torch::Tensor want_logprobs = logprobs_of(*policy), want_ref = logprobs_of(*reference);
    const torch::Tensor want_values = critic->forward(ids).narrow(1, lp - 1, lr).squeeze(0);
    const double want_score = reward->forward(ids)[0][lp + lr - 1].item<double>();
    const torch::Tensor counted = e.response_mask[i].narrow(0, 0, lr);
    EXPECT_TRUE(torch::allclose(e.logprobs[i].narrow(0, 0, lr), want_logprobs, 1e-4, 1e-5)) << "row " << i;
    EXPECT_TRUE(torch::allclose(e.ref_logprobs[i].narrow(0, 0, lr), want_ref, 1e-4, 1e-5)) << "row " << i;
    EXPECT_TRUE(torch::allclose(e.values[i].narrow(0, 0, lr), want_values, 1e-4, 1e-5)) << "row " << i;
    EXPECT_NEAR(e.raw_scores[i].item<double>(), want_score, 1e-5) << "row " << i;
    EXPECT_EQ(counted.sum().item<double>(), static_cast<double>(lr));
    // Nothing after the response's last token counts or carries a value.
    for (const torch::Tensor* t : std::initializer_list<const torch::Tensor*>{&e.logprobs, &e.ref_logprobs, &e.values, &kl, &e.advantages, &e.returns}) {
      EXPECT_EQ((*t)[i].narrow(0, lr, r - lr).abs().sum().item<double>(), 0.0) << "row " << i;
    }
    // The row alone: KL, rewards (score on its last token) and GAE over its own tokens.
    const torch::Tensor row_mask = torch::ones({1, lr});
    const torch::Tensor row_kl = rl::kl_penalty(want_logprobs.unsqueeze(0), want_ref.unsqueeze(0), row_mask, KlEstimator::k1);
    const torch::Tensor row_rewards =
        rl::token_rewards(row_kl, torch::tensor({want_score}, torch::kFloat), row_mask, 0.1);
    const rl::Advantages row = rl::generalized_advantages(row_rewards, want_values.unsqueeze(0), row_mask, 0.9, 0.8);
    EXPECT_TRUE(torch::allclose(kl[i].narrow(0, 0, lr), row_kl.squeeze(0), 1e-4, 1e-5)) << "row " << i;
    EXPECT_TRUE(torch::allclose(e.advantages[i].narrow(0, 0, lr), row.advantages.squeeze(0), 1e-4, 1e-4)) << "row " << i;
    EXPECT_TRUE(torch::allclose(e.returns[i].narrow(0, 0, lr), row.returns.squeeze(0), 1e-4, 1e-4)) << "row " << i;
  }
}

TEST(PpoExperience, NonFiniteRowsAreDroppedAndCounted) {
  rl::Experience e;
  e.prompt_length = 1;
  e.sequences = torch::ones({3, 3}, torch::kLong);
  e.attention_mask = torch::ones({3, 3}, torch::kLong);
  e.response_mask = torch::tensor({1.f, 1.f, 1.f, 0.f, 1.f, 1.f}).reshape({3, 2});
  e.logprobs = torch::zeros({3, 2});
  e.values = torch::zeros({3, 2});
  e.values[1][1] = std::nanf("");  // outside row 1's mask: does not count
  e.raw_scores = torch::tensor({0.5f, 1.0f, std::numeric_limits<float>::infinity()});
  e.prompt_index = {10, 11, 12};
  e.responses = {"a", "b", "c"};
  EXPECT_EQ(rl::drop_nonfinite_rows(e), 1);
  ASSERT_EQ(e.rows(), 2);
  EXPECT_EQ(e.prompt_index, (std::vector<int64_t>{10, 11}));
  e.logprobs[0][1] = std::nanf("");  // inside the mask: the row goes
  EXPECT_EQ(rl::drop_nonfinite_rows(e), 1);
  EXPECT_EQ(e.responses, std::vector<std::string>{"b"});
}

TEST(PpoExperience, ScoreShaping) {
  PpoConfig settings;
  settings.missing_eos_penalty = 1.0;
  settings.reward_clip = 2.0;
  rl::RunningMoments moments;
  const torch::Tensor raw = torch::tensor({0.5f, 3.0f, -4.0f});
  const torch::Tensor ended = torch::tensor({true, false, true});
  const torch::Tensor shaped = rl::shape_scores(raw, ended, settings, moments);
  EXPECT_TRUE(torch::allclose(shaped, torch::tensor({0.5f, 2.0f, -2.0f})));  // 3 - 1 = 2; -4 clipped
  settings.normalize_reward = true;
  settings.reward_clip = 0;
  settings.missing_eos_penalty = 0;
  const torch::Tensor normalised = rl::shape_scores(raw, ended, settings, moments);
  const torch::Tensor x = raw.to(torch::kDouble);
  const double mean = x.mean().item<double>(), std = x.std().item<double>();  // first batch: its own statistics
  EXPECT_TRUE(torch::allclose(normalised.to(torch::kDouble), (x - mean) / std, 1e-5, 1e-6));
}

// --- whole runs -------------------------------------------------------------------------------

Config ppo_config(const fs::path& output) {
  std::ostringstream yaml;
  yaml << "stage: ppo\n"
       << "model: {path: " << folders().policy.string() << "}\n"
       << "tokenizer: {path: " << source("data/tokenizer.model") << ", chat_template: demo}\n"
       << "data: {prompt_file: " << source("data/prompts_train.jsonl") << ", max_samples: 16, max_length: 64}\n"
       << "generation: {max_new_tokens: 6, temperature: 1.0}\n"
       << "train: {device: cpu, learning_rate: 1.0e-3, lr_scheduler: constant, micro_batch_size: 2,"
       << " grad_accumulation: 2, max_steps: 3, save_every: 1, gradient_checkpointing: false}\n"
       << "ppo: {reward_model: " << folders().reward.string() << ", rollout_batch_size: 8, ppo_epochs: 2,"
       << " kl_coef: 0.1, critic_learning_rate: 1.0e-3}\n"
       << "logging: {log_every: 1, progress: never, tensorboard: false}\n"
       << "output: {dir: " << output.string() << "}\n";
  const fs::path file = output.parent_path() / (output.filename().string() + ".yaml");
  fs::create_directories(output.parent_path());
  std::ofstream(file) << yaml.str();
  return load_config(file.string(), {});
}

using ferry_test::metrics_rows;

nlohmann::json result_of(const fs::path& output) { return ferry_test::result_figures(output); }

double row_value(const nlohmann::json& row, const char* name) { return row.at(name).get<double>(); }

TEST(PpoStage, FourModelsUnderOneBudgetTrainAsWithoutOffload) {  // under params and auto
  const fs::path root = fresh_dir("budget");
  const Config plain = ppo_config(root / "none");
  run_stage(Stage::ppo, plain);
  // One model's weights: what generation needs resident. The budget holds that and 1.5 times as
  // much again — a paged group and its gradient staging while learning, and every phase's
  // activations (the KV cache, logits: counted on the emulated device) — less than the four
  // models (or policy and critic with their gradients and moments) together.
  int64_t parameters = 0;
  for (const auto& [name, t] : io::load_hf_weights(folders().policy)) parameters += t.numel();
  const uint64_t model_bytes = static_cast<uint64_t>(parameters) * 4;
  const uint64_t budget = model_bytes * 5 / 2;
  for (const OffloadPolicy policy : {OffloadPolicy::params, OffloadPolicy::auto_}) {
    const std::string name(enum_name(policy));
    SCOPED_TRACE(name);
    Config paged = ppo_config(root / name);
    paged.offload.policy = policy;
    paged.offload.gpu_memory.bytes = budget;
    run_stage(Stage::ppo, paged);

    const auto a = metrics_rows(root / "none"), b = metrics_rows(root / name);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u);
    for (size_t i = 0; i < a.size(); ++i) {
      for (const char* value : {"loss", "policy_loss", "value_loss", "reward/mean", "kl"}) {
        EXPECT_NEAR(row_value(a[i], value), row_value(b[i], value), 1e-6 * std::max(1.0, std::abs(row_value(a[i], value))))
            << value << " at rollout " << i + 1;
      }
    }
    const auto plain_peaks = result_of(root / "none").at("peak_device_bytes");
    const auto paged_peaks = result_of(root / name).at("peak_device_bytes");
    EXPECT_GT(plain_peaks.at("learn").get<uint64_t>(), 4 * model_bytes);  // the four models and two optimizers
    for (const char* phase : {"generate", "score", "learn"}) {
      EXPECT_LE(paged_peaks.at(phase).get<uint64_t>(), budget) << phase;
      EXPECT_GT(paged_peaks.at(phase).get<uint64_t>(), 0u) << phase;
    }
  }
  fs::remove_all(root);
}

TEST(PpoStage, ResumeContinuesWithTheSameRollout) {
  const fs::path root = fresh_dir("resume");
  run_stage(Stage::ppo, ppo_config(root / "straight"));
  Config first = ppo_config(root / "resumed");
  first.train.max_steps = 2;
  run_stage(Stage::ppo, first);
  Config second = ppo_config(root / "resumed");
  second.train.resume = "auto";
  run_stage(Stage::ppo, second);
  const auto straight = metrics_rows(root / "straight"), resumed = metrics_rows(root / "resumed");
  ASSERT_EQ(straight.size(), 3u);
  ASSERT_EQ(resumed.size(), 3u);
  for (const char* name : {"loss", "policy_loss", "value_loss", "reward/mean", "kl", "response_length"}) {
    EXPECT_NEAR(row_value(straight[2], name), row_value(resumed[2], name), 1e-6) << name;
  }
  const io::TensorMap a = io::load_hf_weights(root / "straight" / "final");
  const io::TensorMap b = io::load_hf_weights(root / "resumed" / "final");
  for (const auto& [name, t] : a) EXPECT_TRUE(torch::allclose(t, b.at(name), 0, 1e-6)) << name;
  fs::remove_all(root);
}

}  // namespace
}  // namespace ferry
