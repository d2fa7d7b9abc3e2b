// Online DPO against TRL 1.16's experimental OnlineDPOTrainer (online_dpo_ref.py), on tiny random
// Llamas, fp32: the same sampled answers and rewards (TRL's generation stubbed with them) give the
// same ranking (ties to the first answer; dpo.missing_eos_penalty can flip a pair), loss, logged
// pair values and gradients. Ferry's learner runs the real path: the reference's log-probs as the
// scoring phase takes them, then OnlineDpoLearner's training-mode forward, with and without the
// shared-prompt packing. (TRL's objective/kl and objective/entropy also sum the padding after an
// answer's EOS; Ferry's count the answer's tokens only, so those two are not compared.)
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "train/backbone_runner.h"
#include "train/rl/online_dpo_learner.h"
#include "train/rl/policy_forward.h"

namespace ferry::rl {
namespace {

namespace fs = std::filesystem;

fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "online_dpo";
  if (!fs::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

constexpr int64_t kPrompts = 3;
constexpr int64_t kEos = 2;

double expected(const std::string& name) {
  static const io::TensorMap values = io::load_safetensors(fixture() / "expected.safetensors");
  return values.at(name).item<double>();
}

struct Models {
  CausalLM policy = causal_lm_from_pretrained(fixture() / "policy");
  CausalLM reference = causal_lm_from_pretrained(fixture() / "reference");
  std::unique_ptr<offload::ParameterEngine> engine = offload::make_parameter_engine(offload::EngineOptions{});
  Models() {
    policy->train();
    for (auto& p : reference->parameters()) p.set_requires_grad(false);
    engine->add_model("policy", offload::group_parameters(*policy, false), true);
    engine->add_model("reference", offload::group_parameters(*reference, false), false);
  }
  RolloutModels rollout() {
    RolloutModels m;
    m.policy = policy.get();
    m.reference = reference.get();
    return m;
  }
};

// The fixture's step in Ferry's layout (a prompt's two answers in rows 2i, 2i + 1), its reference
// log-probs scored as the rollout scores them, and scores = rewards - penalty where no EOS.
Experience fixture_experience(Models& models, double missing_eos_penalty) {
  const io::TensorMap t = io::load_safetensors(fixture() / "batch.safetensors");
  std::vector<int64_t> order;  // Ferry row -> TRL row
  for (int64_t i = 0; i < kPrompts; ++i) order.insert(order.end(), {i, kPrompts + i});
  const torch::Tensor index = torch::tensor(order);
  const torch::Tensor prompt = t.at("prompt_ids").index_select(0, index);
  const torch::Tensor completion = t.at("completion_ids").index_select(0, index);
  const torch::Tensor mask = t.at("completion_mask").index_select(0, index);
  Experience e;
  e.prompt_length = prompt.size(1);
  e.sequences = torch::cat({prompt, completion}, 1);
  e.attention_mask = torch::cat({torch::ones_like(prompt), mask}, 1);
  e.response_mask = mask.to(torch::kFloat);
  e.ended = completion.eq(kEos).any(1);
  e.raw_scores = t.at("rewards").index_select(0, index);
  e.scores = e.raw_scores - missing_eos_penalty * e.ended.logical_not().to(torch::kFloat);
  BackboneRunner runner(*models.engine, false);
  torch::NoGradGuard no_grad;
  e.ref_logprobs = response_token_logprobs(runner, "reference", *models.reference, e.sequences, e.attention_mask,
                                           e.prompt_length, 1.0, false, false)
                       .logprobs.to(torch::kCPU) *
                   e.response_mask;
  return e;
}

Config config_for(double beta, bool share_prompts) {
  Config c;
  c.dpo.online = true;
  c.dpo.beta = beta;
  c.train.micro_batch_size = 2;  // two micro-batches (2 pairs + 1) in the step
  c.train.grad_accumulation = 2;
  c.train.learning_rate = 1e-3;
  c.train.share_prompts = share_prompts;
  return c;
}

TEST(OnlineDpoParity, RankingTiesAndTheEosPenaltyAsTrl) {
  // Scores per prompt (first, second): 1 / 0, 0 / 1, 0.5 / 0.5.
  const RankedPairs ranked = rank_pairs(torch::tensor({1.0, 0.0, 0.0, 1.0, 0.5, 0.5}));
  EXPECT_TRUE(ranked.chosen.equal(torch::tensor({0, 3, 4}, torch::kLong)));
  EXPECT_TRUE(ranked.rejected.equal(torch::tensor({1, 2, 5}, torch::kLong)));
}

TEST(OnlineDpoParity, LossAndLoggedValuesMatchTrl) {
  torch::set_num_threads(1);
  for (const bool share : {true, false}) {
    for (const auto& [key, beta, penalty] : std::vector<std::tuple<std::string, double, double>>{
             {"loss.sigmoid", 0.1, 0.0}, {"loss.sigmoid_eos", 0.1, 1.5}, {"loss.sigmoid_beta", 0.5, 0.0}}) {
      Models models;
      const Config config = config_for(beta, share);
      OnlineDpoLearner learner(config, *models.engine, models.rollout());
      EXPECT_EQ(learner.pairs_per_rollout(), 4);
      int64_t step = 0;
      const OnlineDpoStats stats = learner.learn(fixture_experience(models, penalty), step, 10);
      EXPECT_NEAR(stats.loss, expected(key), 1e-5) << key << (share ? " shared prompts" : "");
      EXPECT_EQ(step, 1);
      if (key != "loss.sigmoid") continue;
      for (const char* name : {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
                               "logps/chosen", "logps/rejected"}) {
        std::string trl = name;
        trl.replace(trl.find('/'), 1, "_");
        const auto value = find_metric(stats.values, name);
        ASSERT_TRUE(value.has_value()) << name;
        EXPECT_NEAR(*value, expected(trl), 1e-4) << name;
      }
    }
  }
}

TEST(OnlineDpoParity, GradientsMatchTrl) {
  torch::set_num_threads(1);
  Models models;
  const Experience experience = fixture_experience(models, 0.0);
  const RankedPairs ranked = rank_pairs(experience.scores);
  const Experience pairs = experience.select(torch::cat({ranked.chosen, ranked.rejected}));
  models.engine->zero_grad();
  BackboneRunner runner(*models.engine, false);
  const PolicyForward forward = policy_forward(runner, "policy", *models.policy, pairs, 1.0, false, true);
  DpoConfig settings;
  settings.beta = 0.1;
  const PairLosses losses = online_pair_losses(settings, forward.logprobs, pairs.ref_logprobs, forward.mask);
  losses.losses.mean().backward();
  static const io::TensorMap want = io::load_safetensors(fixture() / "expected.safetensors");
  int checked = 0;
  for (const auto& item : models.policy->named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const double error =
        (item.value().grad() - want.at("grad.sigmoid." + item.key())).abs().max().item<double>();
    EXPECT_LE(error, 1e-5) << item.key();
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 2 * 9 + 1);
}

}  // namespace
}  // namespace ferry::rl
