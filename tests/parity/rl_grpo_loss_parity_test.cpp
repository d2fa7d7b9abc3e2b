// GRPO's loss and the critic-free advantages against TRL (rl_grpo_loss_ref.py calls TRL 1.16's own
// GRPOTrainer._compute_loss on the same float32 tensors): every loss_type (grpo, bnpo, dr_grpo, dapo,
// cispo, sapo, luspo, vespo) x importance_sampling_level,
// with and without epsilon_high and beta (with and without the KL's bias correction), loss and
// gradient within 1e-6; TRL's group advantages for scale_rewards group / batch / none, a group of
// equal rewards included; and PPO's rloo and reinforce_baseline estimators against the written-out
// OpenRLHF formulas.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "tests/parity/tensor_fixture.h"
#include "train/rl/group_advantages.h"
#include "train/rl/grpo_loss.h"
#include "train/rl/rollout_advantages.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

struct Fixture : ferry_test::TensorFixture {
  Fixture() : TensorFixture("rl_grpo_loss") {}
};

using ferry_test::max_error;

TEST(GrpoLossParity, EveryLossTypeLevelClipAndKlMatchesTrl) {
  const Fixture f;
  if (f.in.empty()) return;
  rl::GrpoLossScale scale;  // as the reference's stub trainer
  scale.micro_batches_in_step = 2;
  scale.micro_batches_in_rollout = 4;
  scale.rollout_tokens = 50;
  scale.max_completion_length = 8;
  int cases = 0;
  for (const GrpoLoss type : {GrpoLoss::grpo, GrpoLoss::bnpo, GrpoLoss::dr_grpo, GrpoLoss::dapo, GrpoLoss::cispo,
                              GrpoLoss::sapo, GrpoLoss::luspo, GrpoLoss::vespo}) {
    for (const ImportanceSampling level : {ImportanceSampling::token, ImportanceSampling::sequence}) {
      std::vector<double> highs{0.2, 0.28};
      if (type == GrpoLoss::cispo) highs.push_back(5.0);  // the weight uncapped: its stop-gradient shows
      for (const double high : highs) {
        for (const double beta : {0.0, 0.04}) {
          for (const bool bias : {true, false}) {
            if (beta == 0.0 && !bias) continue;
            rl::GrpoLossSettings s;
            s.loss_type = type;
            s.level = level;
            s.epsilon_low = 0.2;
            s.epsilon_high = high;
            s.beta = beta;
            s.bias_correction_kl = bias;
            s.sapo_temperature_pos = 0.9;  // as the reference (not TRL's defaults)
            s.sapo_temperature_neg = 1.2;
            s.vespo_k_pos = 2.5;
            s.vespo_lambda_pos = 3.5;
            s.vespo_k_neg = 2.0;
            s.vespo_lambda_neg = 1.5;
            const torch::Tensor new_logps = f["new_logps"].clone().requires_grad_(true);
            const rl::GrpoLossTerms terms =
                rl::grpo_loss(new_logps, f["old_logps"], f["ref_logps"], f["advantages"], f["mask"], s, scale);
            terms.loss.backward();
            const std::string name = std::string(enum_name(type)) + "." + std::string(enum_name(level)) +
                                     (high == 0.2 ? ".eh0.2" : high == 0.28 ? ".eh0.28" : ".eh5") + (beta == 0.0 ? ".beta0" : ".beta0.04") +
                                     (bias ? "" : ".nobias");
            EXPECT_LT(max_error(terms.loss.detach(), f.want("loss." + name)), 1e-6) << name;
            EXPECT_LT(max_error(new_logps.grad(), f.want("grad." + name)), 1e-6) << name;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 102);
}

TEST(GrpoLossParity, GroupAdvantagesMatchTrlAndAnEqualGroupGivesZero) {
  const Fixture f;
  if (f.in.empty()) return;
  const torch::Tensor groups = rl::consecutive_groups(6, 3);
  const torch::Tensor rewards = f["group_rewards"];
  EXPECT_LT(max_error(rl::group_advantages(rewards, groups, RewardScaling::group), f.want("adv.group")), 1e-6);
  EXPECT_LT(max_error(rl::group_advantages(rewards, groups, RewardScaling::batch), f.want("adv.batch")), 1e-6);
  EXPECT_LT(max_error(rl::group_advantages(rewards, groups, RewardScaling::none), f.want("adv.none")), 1e-6);
  EXPECT_LT(max_error(rl::group_advantages(f.want("rewards.mixed"), groups, RewardScaling::group),
                      f.want("adv.mixed.group")),
            1e-6);
  // The second group's rewards are all 0.5: advantage exactly 0, finite.
  const torch::Tensor equal = rl::group_advantages(rewards, groups, RewardScaling::group).narrow(0, 3, 3);
  EXPECT_TRUE(torch::isfinite(equal).all().item<bool>());
  EXPECT_EQ(equal.abs().max().item<double>(), 0.0);
}

TEST(GrpoLossParity, CriticFreePpoEstimatorsMatchTheWrittenOutFormulas) {
  const Fixture f;
  if (f.in.empty()) return;
  for (const AdvantageEstimator estimator : {AdvantageEstimator::rloo, AdvantageEstimator::reinforce_baseline}) {
    const std::string name(enum_name(estimator));
    // k1 against the reference is logprobs - ref_logprobs: with logprobs 0, ref = -kl gives the fixture's kl.
    rl::Experience e;
    e.response_mask = f["mask"];
    e.logprobs = torch::zeros_like(f["kl"]);
    e.ref_logprobs = -f["kl"];
    e.scores = f["scores"];
    e.prompt_index = {7, 7, 7, 2, 2, 2};
    PpoConfig settings;
    settings.advantage_estimator = estimator;
    settings.kl_estimator = KlEstimator::k1;
    settings.gamma = 1.0;
    settings.whiten_advantages = true;
    rl::estimate_advantages(e, settings, 0.1);
    EXPECT_LT(max_error(e.advantages, f.want(name + ".advantages")), 1e-5) << name;
    const torch::Tensor group = rl::consecutive_groups(6, 3);
    const torch::Tensor baseline = estimator == AdvantageEstimator::rloo ? rl::leave_one_out_baseline(f["scores"], group)
                                                                         : rl::group_mean_baseline(f["scores"], group);
    EXPECT_LT(max_error(baseline, f.want(name + ".scores")), 1e-6) << name;
  }
}

}  // namespace
}  // namespace ferry
