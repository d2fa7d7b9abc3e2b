// GRPO's learner against TRL 1.16's GRPOTrainer (rl_grpo_learner_ref.py) on a tiny random Llama, fp32: the loss
// scale the learner derives from its config and the rollout (micro-batches per optimizer step and per rollout,
// the rollout's completion tokens, max_completion_length from generation.max_new_tokens or, with an environment,
// rollout.max_total_tokens; grpo.num_iterations passes) must give, for every loss_type, the logged policy_loss and
// the last optimizer step's gradients TRL's training_step gives over the same micro-batches and accumulation
// windows. rl_grpo_loss_parity_test checks grpo_loss() under a scale set by hand; this runs GrpoLearner::learn.
// The learner runs at learning rate 0 so that every step sees the fixture's weights, and its rows are handed to it
// so that its own shuffle (replayed from a copy of its generator) yields the reference's row order.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <memory>

#include "offload/engine.h"
#include "src/model/pretrained.h"
#include "tests/parity/tensor_fixture.h"
#include "train/rl/experience_gatherer.h"
#include "train/rl/grpo_learner.h"

namespace ferry::rl {
namespace {

namespace fs = std::filesystem;
using ferry_test::max_error;

struct Fixture : ferry_test::TensorFixture {
  Fixture() : TensorFixture("rl_grpo_learner") {}
};

// The reference's two configs (see rl_grpo_learner_ref.py), in Ferry's settings.
struct Case {
  std::string name;
  int64_t micro = 2, accumulation = 2, num_iterations = 1, steps = 2;
  double beta = 0, epsilon_high = 0;
  ImportanceSampling level = ImportanceSampling::token;
  bool environment = false, share_prompts = false;
};

Config config_for(const Case& c, GrpoLoss type) {
  Config config;
  config.train.micro_batch_size = c.micro;
  config.train.grad_accumulation = c.accumulation;
  config.train.learning_rate = 0.0;  // every step at the fixture's weights
  config.train.max_grad_norm = 0.0;
  config.train.share_prompts = c.share_prompts;
  config.generation.max_new_tokens = 9;
  config.generation.temperature = 1.0;
  config.generation.greedy = false;
  if (c.environment) config.rollout.environment = "an environment";  // the learner only asks whether there is one
  config.rollout.max_total_tokens = 13;
  config.grpo.num_generations = 4;
  config.grpo.generation_batch_size = 8;
  config.grpo.num_iterations = c.num_iterations;
  config.grpo.loss_type = type;
  config.grpo.importance_sampling_level = c.level;
  config.grpo.beta = c.beta;
  config.grpo.epsilon = 0.2;
  config.grpo.epsilon_high = c.epsilon_high;
  return config;
}

// The fixture's rollout as the GRPO stage hands it to the learner: prompt then response columns, the policy's
// rollout log-probs (old) and the reference's, each row's advantage over its response.
Experience fixture_experience(const Fixture& f) {
  const torch::Tensor prompt = f["prompt_ids"], completion = f["completion_ids"], mask = f["completion_mask"];
  Experience e;
  e.prompt_length = prompt.size(1);
  e.sequences = torch::cat({prompt, completion}, 1);
  e.attention_mask = torch::cat({torch::ones_like(prompt), mask}, 1);
  e.response_mask = mask.to(torch::kFloat);
  e.logprobs = f["old_logps"];
  e.ref_logprobs = f["ref_logps"];
  e.advantages = f["advantages"].unsqueeze(1).expand({e.rows(), e.response_length()}).contiguous();
  const torch::Tensor index = f["prompt_index"];
  for (int64_t i = 0; i < index.size(0); ++i) e.prompt_index.push_back(index[i].item<int64_t>());
  return e;
}

TEST(GrpoLearnerParity, LossAndGradientsOfEveryLossTypeMatchTrlsTrainer) {
  torch::set_num_threads(1);
  const Fixture f;
  if (f.in.empty()) return;
  const fs::path folder = fs::path(FERRY_FIXTURES_DIR) / "rl_grpo_learner";
  const Experience rollout = fixture_experience(f);
  const std::vector<Case> cases = {
      {.name = "steps2", .micro = 2, .accumulation = 2, .num_iterations = 1, .steps = 2, .beta = 0.04,
       .epsilon_high = 0.28, .level = ImportanceSampling::token, .environment = false, .share_prompts = false},
      {.name = "iterations2", .micro = 2, .accumulation = 4, .num_iterations = 2, .steps = 2, .beta = 0.0,
       .epsilon_high = 0.0, .level = ImportanceSampling::sequence, .environment = true, .share_prompts = true},
  };
  int checked = 0;
  for (const Case& c : cases) {
    for (const GrpoLoss type : {GrpoLoss::grpo, GrpoLoss::bnpo, GrpoLoss::dr_grpo, GrpoLoss::dapo, GrpoLoss::cispo,
                                GrpoLoss::sapo, GrpoLoss::luspo, GrpoLoss::vespo}) {
      const std::string name = c.name + "." + std::string(enum_name(type));
      const Config config = config_for(c, type);
      CausalLM policy = causal_lm_from_pretrained(folder / "policy");
      policy->train();
      const std::unique_ptr<offload::ParameterEngine> engine = offload::make_parameter_engine(offload::EngineOptions{});
      engine->add_model("policy", offload::group_parameters(*policy, false), true);
      RolloutModels models;
      models.policy = policy.get();
      GrpoLearner learner(config, *engine, models);
      ASSERT_EQ(learner.steps_per_rollout(rollout.rows()), c.steps) << name;

      // Rows placed so that the learner's first shuffle gives the reference's order 0..B-1 (with one minibatch
      // per rollout and share_prompts, every pass's minibatch is sorted back into that order).
      at::Generator generator = at::detail::createCPUGenerator(17);
      at::Generator replay = generator.clone();
      const std::vector<torch::Tensor> minibatches = LearningShare(config).shuffled_minibatches(rollout.rows(), replay);
      const torch::Tensor order = torch::cat(minibatches);
      const Experience placed = rollout.select(std::get<1>(order.sort()));
      ASSERT_TRUE(placed.select(order).sequences.equal(rollout.sequences)) << name;
      if (c.num_iterations > 1) {
        ASSERT_EQ(minibatches.size(), 1u) << name;
      }

      int64_t step = 0;
      const GrpoLearnStats stats = learner.learn(placed, step, 10, generator);
      EXPECT_EQ(stats.steps, c.steps) << name;
      EXPECT_EQ(stats.skipped_steps, 0) << name;
      const double want_loss = f.want("loss." + name).item<double>();
      EXPECT_NEAR(stats.loss, want_loss, 1e-5 + 1e-5 * std::abs(want_loss)) << name;
      const double want_norm = f.want("grad_norm." + name).item<double>();
      EXPECT_NEAR(stats.grad_norm, want_norm, 1e-5 + 1e-5 * want_norm) << name;
      for (const auto& item : policy->named_parameters()) {
        ASSERT_TRUE(item.value().grad().defined()) << name << " " << item.key();
        const torch::Tensor want = f.want("grad." + name + "." + item.key());
        const double scale = std::max(1.0, want.abs().max().item<double>());
        EXPECT_LE(max_error(item.value().grad(), want), 2e-5 * scale) << name << " " << item.key();
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16);
}

}  // namespace
}  // namespace ferry::rl
