// PPO's formulas against an independent reference (rl_ppo_math_ref.py: NumPy float64 following TRL
// 0.24's PPOTrainer and core.py, TRL 1.16's entropy_from_logits / selective_log_softmax): the three
// KL estimators, per-token rewards, GAE, whitening, the clipped policy and value losses with their
// clip fractions and approximate KL, entropy and token log-probs, the adaptive KL controller and
// the running reward statistics — on fixed float64 tensors with ragged masks whose padding holds
// garbage the formulas must ignore.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "kernels/ops/chunked_lm_head.h"
#include "tests/parity/tensor_fixture.h"
#include "train/rl/advantages.h"
#include "train/rl/kl_controller.h"
#include "train/rl/masked_stats.h"
#include "train/rl/policy_losses.h"
#include "train/rl/rollout_advantages.h"
#include "train/rl/running_moments.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

struct Fixture : ferry_test::TensorFixture {
  Fixture() : TensorFixture("rl_ppo_math") {}
};

using ferry_test::max_error;

constexpr double kTolerance = 1e-10;  // float64 on both sides
constexpr double kGamma = 0.99, kLam = 0.95, kKlCoef = 0.1, kClip = 0.2;

TEST(PpoMathParity, KlEstimators) {
  const Fixture f;
  EXPECT_LT(max_error(rl::kl_penalty(f["old_logprobs"], f["ref_logprobs"], f["mask"], KlEstimator::k1), f.want("kl.k1")), kTolerance);
  EXPECT_LT(max_error(rl::kl_penalty(f["old_logprobs"], f["ref_logprobs"], f["mask"], KlEstimator::k2), f.want("kl.k2")), kTolerance);
  EXPECT_LT(max_error(rl::kl_penalty(f["old_logprobs"], f["ref_logprobs"], f["mask"], KlEstimator::k3), f.want("kl.k3")), kTolerance);
}

TEST(PpoMathParity, RewardsGaeAndWhitening) {
  const Fixture f;
  const torch::Tensor kl = rl::kl_penalty(f["old_logprobs"], f["ref_logprobs"], f["mask"], KlEstimator::k1);
  const torch::Tensor rewards = rl::token_rewards(kl, f["scores"], f["mask"], kKlCoef);
  EXPECT_LT(max_error(rewards, f.want("rewards")), kTolerance);
  const rl::Advantages gae = rl::generalized_advantages(rewards, f["old_values"], f["mask"], kGamma, kLam);
  EXPECT_LT(max_error(gae.advantages, f.want("advantages_raw")), kTolerance);
  EXPECT_LT(max_error(gae.returns, f.want("returns")), kTolerance);
  EXPECT_LT(max_error(rl::masked_whiten(gae.advantages, f["mask"]), f.want("advantages")), kTolerance);
}

TEST(PpoMathParity, EstimateAdvantagesOnAnExperience) {
  const Fixture f;
  rl::Experience e;
  e.response_mask = f["mask"];
  e.logprobs = f["old_logprobs"];
  e.ref_logprobs = f["ref_logprobs"];
  e.values = f["old_values"];
  e.scores = f["scores"];
  PpoConfig settings;
  settings.gamma = kGamma;
  settings.lam = kLam;
  settings.kl_estimator = KlEstimator::k1;
  const torch::Tensor kl = rl::estimate_advantages(e, settings, kKlCoef);
  EXPECT_LT(max_error(kl, f.want("kl.k1")), kTolerance);
  EXPECT_LT(max_error(e.advantages, f.want("advantages")), kTolerance);
  EXPECT_LT(max_error(e.returns, f.want("returns")), kTolerance);
}

TEST(PpoMathParity, ClippedPolicyAndValueLosses) {
  const Fixture f;
  const torch::Tensor mask = f["mask"];
  const rl::ClippedLoss pg =
      rl::clipped_policy_loss(f["new_logprobs"], f["old_logprobs"], f.want("advantages"), mask, kClip);
  EXPECT_LT(max_error(pg.per_token, f.want("policy.per_token")), kTolerance);
  EXPECT_LT(max_error(rl::masked_mean(pg.per_token, mask), f.want("policy.loss")), kTolerance);
  EXPECT_LT(max_error(rl::masked_mean(pg.clipped, mask), f.want("policy.clipfrac")), kTolerance);
  const torch::Tensor diff = f["new_logprobs"] - f["old_logprobs"];
  EXPECT_LT(max_error(0.5 * rl::masked_mean(diff * diff, mask), f.want("policy.approxkl")), kTolerance);
  const rl::ClippedLoss vf = rl::clipped_value_loss(f["new_values"], f["old_values"], f.want("returns"), mask, kClip);
  EXPECT_LT(max_error(rl::masked_mean(vf.per_token, mask), f.want("value.loss")), kTolerance);
  EXPECT_LT(max_error(rl::masked_mean(vf.clipped, mask), f.want("value.clipfrac")), kTolerance);
}

TEST(PpoMathParity, EntropyAndTokenLogprobs) {
  const Fixture f;
  // Ferry's LM head (kernels/ops/chunked_lm_head.h) on hidden states = the fixture's logits and an
  // identity head weight, chunked and not, in fp32; the reference is float64.
  const torch::Tensor logits = f["logits"].to(torch::kFloat);
  const torch::Tensor rows = logits.reshape({-1, logits.size(-1)});
  const torch::Tensor identity = torch::eye(logits.size(-1));
  for (const int64_t chunk : {0, 3}) {
    const auto entropy = kernels::lm_head_tokens(rows, identity, f["token_ids"].reshape({-1}), 1.0, chunk, true);
    EXPECT_LT(max_error(entropy.entropy.view(f.want("entropy").sizes()), f.want("entropy")), 1e-5) << chunk;
    const auto tokens = kernels::lm_head_tokens(rows, identity, f["token_ids"].reshape({-1}), 0.7, chunk, false);
    EXPECT_LT(max_error(tokens.logprobs.view(f.want("token_logprobs").sizes()), f.want("token_logprobs")), 1e-5)
        << chunk;
  }
}

TEST(PpoMathParity, AdaptiveKlController) {
  const Fixture f;
  rl::KlController kl(0.1, 6.0, 10000.0);
  const std::vector<std::pair<double, int64_t>> updates{{3.0, 256}, {12.0, 256}, {6.6, 512}, {0.0, 256}, {5.0, 10000}};
  const torch::Tensor want = f.want("kl_controller");
  for (size_t i = 0; i < updates.size(); ++i) {
    kl.update(updates[i].first, updates[i].second);
    EXPECT_NEAR(kl.value(), want[static_cast<int64_t>(i)].item<double>(), 1e-14) << "update " << i;
  }
  rl::KlController fixed(0.1, 0.0, 10000.0);
  fixed.update(100.0, 1000);
  EXPECT_EQ(fixed.value(), 0.1);  // no target: the coefficient stays
}

TEST(PpoMathParity, RunningMoments) {
  const Fixture f;
  rl::RunningMoments moments;
  for (int64_t i = 0; i < 3; ++i) {
    moments.update(f["moments.batch" + std::to_string(i)]);
    EXPECT_NEAR(moments.mean, f.want("moments.mean")[i].item<double>(), 1e-12) << "batch " << i;
    EXPECT_NEAR(moments.std, f.want("moments.std")[i].item<double>(), 1e-12) << "batch " << i;
  }
}

}  // namespace
}  // namespace ferry
