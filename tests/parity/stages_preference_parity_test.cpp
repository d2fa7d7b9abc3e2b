// The reward-model and DPO-family losses against TRL 1.16's own trainers (preference_losses_ref.py:
// DPOTrainer, CPOTrainer for SimPO, ORPOTrainer, RewardTrainer) on tiny random Llamas, fp32: the
// summed log-probs, every loss type, the logged metrics, the sigmoid loss's gradients, and the
// reward model's rewards, loss and accuracy. Runs the real path: the stage objectives through
// BackboneRunner and the parameter engine. Also checks that the three ways of getting the DPO
// reference (a frozen model, the policy with LoRA off, precomputed and cached) agree.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <sstream>

#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/lora.h"
#include "src/model/pretrained.h"
#include "stages/dpo.h"
#include "stages/rm.h"
#include "train/backbone_runner.h"
#include "train/preference_losses.h"
#include "train/preference/reference_logps_cache.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "preference_losses";
  if (!fs::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

constexpr int64_t kPairs = 3;

MicroBatch fixture_batch() {
  const io::TensorMap t = io::load_safetensors(fixture() / "batch.safetensors");
  MicroBatch batch;
  for (const char* name : {"input_ids", "attention_mask", "position_ids", "labels", "margin"}) {
    batch.tensors[name] = t.at(name);
  }
  batch.loss_weight = t.at("margin").size(0);
  return batch;
}

double scalar(const io::TensorMap& expected, const std::string& name) { return expected.at(name).item<double>(); }

double max_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach().to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// The policy and the frozen reference of the fixture in one `none` engine, as train-dpo holds them.
struct DpoModels {
  CausalLM policy = causal_lm_from_pretrained(fixture() / "policy");
  CausalLM reference = causal_lm_from_pretrained(fixture() / "reference");
  std::unique_ptr<offload::ParameterEngine> engine = offload::make_parameter_engine(offload::EngineOptions{});
  DpoModels() {
    policy->train();
    for (auto& p : reference->parameters()) p.set_requires_grad(false);
    engine->add_model("policy", offload::group_parameters(*policy, false), true);
    engine->add_model("reference", offload::group_parameters(*reference, false), false);
  }
  // The mean loss over the pairs and the logged means, as the loop computes them from the sum.
  std::pair<torch::Tensor, MetricValues> loss(const DpoConfig& settings, const MicroBatch& batch) {
    const ReferenceSource source = uses_reference(settings.loss_type) ? ReferenceSource::model : ReferenceSource::none;
    DpoObjective objective(settings, source, "policy", *policy, "reference", reference.get());
    BackboneRunner runner(*engine, false);
    const LossSum sum = objective.loss(batch, runner);
    MetricValues means = sum.extra;
    for (auto& v : means) v.value /= static_cast<double>(batch.loss_weight);
    return {sum.sum / static_cast<double>(batch.loss_weight), means};
  }
};

DpoConfig dpo(DpoLoss type, double beta, double label_smoothing = 0.0,
              FDivergence divergence = FDivergence::reverse_kl, double alpha = 0.5) {
  DpoConfig c;
  c.loss_type = {type};
  c.beta = beta;
  c.label_smoothing = label_smoothing;
  c.discopop_tau = 0.07;  // as the reference (not the default)
  c.f_divergence_type = divergence;
  c.f_alpha_divergence_coef = alpha;
  return c;
}

TEST(PreferenceParity, SequenceLogpsMatchTrl) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  DpoModels models;
  const MicroBatch batch = fixture_batch();
  BackboneRunner runner(*models.engine, false);
  const torch::Tensor policy = reference_logps(batch, "policy", *models.policy, false, runner);
  const torch::Tensor reference = reference_logps(batch, "reference", *models.reference, false, runner);
  EXPECT_LE(max_error(policy.narrow(0, 0, kPairs), expected.at("policy_chosen_logps")), 1e-4);
  EXPECT_LE(max_error(policy.narrow(0, kPairs, kPairs), expected.at("policy_rejected_logps")), 1e-4);
  EXPECT_LE(max_error(reference.narrow(0, 0, kPairs), expected.at("reference_chosen_logps")), 1e-4);
  EXPECT_LE(max_error(reference.narrow(0, kPairs, kPairs), expected.at("reference_rejected_logps")), 1e-4);
}

TEST(PreferenceParity, EveryDpoLossTypeMatchesTrl) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  DpoModels models;
  const MicroBatch batch = fixture_batch();
  DpoConfig simpo = dpo(DpoLoss::simpo, 2.0);
  simpo.simpo_gamma = 0.5;
  DpoConfig simpo_cpo = simpo;
  simpo_cpo.cpo_alpha = 1.0;
  std::vector<std::pair<std::string, DpoConfig>> cases{
      {"loss.sigmoid", dpo(DpoLoss::sigmoid, 0.1)},       {"loss.sigmoid_ls", dpo(DpoLoss::sigmoid, 0.1, 0.1)},
      {"loss.robust", dpo(DpoLoss::robust, 0.1, 0.1)},    {"loss.hinge", dpo(DpoLoss::hinge, 0.1)},
      {"loss.ipo", dpo(DpoLoss::ipo, 0.5)},               {"loss.simpo", simpo},
      {"loss.simpo_cpo", simpo_cpo},                      {"loss.orpo", dpo(DpoLoss::orpo, 0.1)},
      {"loss.exo_pair", dpo(DpoLoss::exo_pair, 0.1, 1e-3)}, {"loss.nca_pair", dpo(DpoLoss::nca_pair, 0.1)},
      {"loss.bco_pair", dpo(DpoLoss::bco_pair, 0.1)},     {"loss.sppo_hard", dpo(DpoLoss::sppo_hard, 0.1)},
      {"loss.aot", dpo(DpoLoss::aot, 0.1, 0.1)},          {"loss.aot_unpaired", dpo(DpoLoss::aot_unpaired, 0.1, 0.1)},
      {"loss.apo_zero", dpo(DpoLoss::apo_zero, 0.1)},     {"loss.apo_down", dpo(DpoLoss::apo_down, 0.1)},
      {"loss.discopop", dpo(DpoLoss::discopop, 0.1)},     {"loss.sft", dpo(DpoLoss::sft, 0.1)},
      {"loss.sigmoid_norm", dpo(DpoLoss::sigmoid_norm, 0.1)},
      {"loss.sigmoid.forward_kl", dpo(DpoLoss::sigmoid, 0.1, 0.0, FDivergence::forward_kl)},
      {"loss.sigmoid.js_divergence", dpo(DpoLoss::sigmoid, 0.1, 0.0, FDivergence::js_divergence)},
      {"loss.sigmoid.alpha_divergence", dpo(DpoLoss::sigmoid, 0.1, 0.0, FDivergence::alpha_divergence, 0.5)},
      {"loss.ipo.alpha_divergence1.5", dpo(DpoLoss::ipo, 0.5, 0.0, FDivergence::alpha_divergence, 1.5)},
      {"loss.hinge.forward_kl", dpo(DpoLoss::hinge, 0.1, 0.0, FDivergence::forward_kl)},
      {"loss.discopop.js_divergence", dpo(DpoLoss::discopop, 0.1, 0.0, FDivergence::js_divergence)},
      {"loss.sigmoid_norm.forward_kl", dpo(DpoLoss::sigmoid_norm, 0.1, 0.0, FDivergence::forward_kl)},
      {"loss.sigmoid_norm.js_divergence", dpo(DpoLoss::sigmoid_norm, 0.1, 0.0, FDivergence::js_divergence)},
  };
  auto combined = [](std::vector<DpoLoss> types, std::vector<double> weights, double beta, double ld_alpha) {
    DpoConfig c = dpo(types.front(), beta);
    c.loss_type = std::move(types);
    c.loss_weights = std::move(weights);
    c.ld_alpha = ld_alpha;
    return c;
  };
  cases.insert(cases.end(), {
      {"loss.mpo", combined({DpoLoss::sigmoid, DpoLoss::bco_pair, DpoLoss::sft}, {0.8, 0.2, 1.0}, 0.1, 1.0)},
      {"loss.sigmoid.ld0.5", combined({DpoLoss::sigmoid}, {}, 0.1, 0.5)},
      {"loss.ipo.ld0.5", combined({DpoLoss::ipo}, {}, 0.5, 0.5)},
      {"loss.mpo.ld0.3", combined({DpoLoss::sigmoid, DpoLoss::sft}, {1.0, 0.5}, 0.1, 0.3)},
      {"loss.apo_zero.ld0", combined({DpoLoss::apo_zero}, {}, 0.1, 0.0)},
  });
  for (const auto& [key, settings] : cases) {
    torch::NoGradGuard no_grad;
    const double got = models.loss(settings, batch).first.item<double>();
    EXPECT_NEAR(got, scalar(expected, key), 1e-5) << key;
  }
}

TEST(PreferenceParity, SigmoidMetricsAndGradientsMatchTrl) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  DpoModels models;
  models.engine->zero_grad();
  auto [loss, metrics] = models.loss(dpo(DpoLoss::sigmoid, 0.1), fixture_batch());
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), scalar(expected, "loss.sigmoid"), 1e-5);
  for (const auto& [ours, trl] : std::vector<std::pair<std::string, std::string>>{
           {"rewards/chosen", "dpo.rewards_chosen"},
           {"rewards/rejected", "dpo.rewards_rejected"},
           {"rewards/margins", "dpo.rewards_margins"},
           {"rewards/accuracies", "dpo.rewards_accuracies"},
           {"logps/chosen", "dpo.logps_chosen"},
           {"logps/rejected", "dpo.logps_rejected"}}) {
    const auto value = find_metric(metrics, ours);
    ASSERT_TRUE(value.has_value()) << ours;
    EXPECT_NEAR(*value, scalar(expected, trl), 1e-4) << ours;
  }
  int checked = 0;
  for (const auto& item : models.policy->named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const torch::Tensor& want = expected.at("grad.sigmoid." + item.key());
    EXPECT_LE(max_error(item.value().grad(), want), 1e-5) << "gradient of " << item.key();
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 2 * 9 + 1);  // embed, lm_head, 9 per layer, final norm
  for (const auto& p : models.reference->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(PreferenceParity, RewardModelMatchesTrlRewardTrainer) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  ScoreModel model = score_model_from_pretrained(fixture() / "reward");
  auto engine = offload::make_parameter_engine(offload::EngineOptions{});
  engine->add_model("reward", offload::group_parameters(*model, false), true);
  BackboneRunner runner(*engine, false);
  torch::NoGradGuard no_grad;
  MicroBatch batch = fixture_batch();
  const torch::Tensor rewards = sequence_rewards(batch, "reward", *model, runner);
  EXPECT_LE(max_error(rewards.narrow(0, 0, kPairs), expected.at("rm.rewards_chosen")), 1e-5);
  EXPECT_LE(max_error(rewards.narrow(0, kPairs, kPairs), expected.at("rm.rewards_rejected")), 1e-5);

  auto mean_loss = [&](double center, bool margin) {
    MicroBatch b = batch;
    if (!margin) b.tensors["margin"] = torch::zeros({kPairs});
    const LossSum sum = RewardObjective("reward", *model, center).loss(b, runner);
    return std::pair{sum.sum.item<double>() / kPairs, *find_metric(sum.extra, "accuracy") / kPairs};
  };
  EXPECT_NEAR(mean_loss(0.0, false).first, scalar(expected, "rm.loss"), 1e-5);
  EXPECT_NEAR(mean_loss(0.0, true).first, scalar(expected, "rm.loss_margin"), 1e-5);
  EXPECT_NEAR(mean_loss(0.01, false).first, scalar(expected, "rm.loss_centered"), 1e-5);
  EXPECT_NEAR(mean_loss(0.0, false).second, scalar(expected, "rm.accuracy"), 1e-6);
}

// Preference pairs holding the fixture batch's rows (ids up to the padding, loss mask from labels).
std::vector<PreferencePair> pairs_of(const MicroBatch& batch) {
  const torch::Tensor ids = batch.at("input_ids"), mask = batch.at("attention_mask"), labels = batch.at("labels");
  auto row = [&](int64_t r) {
    TokenizedSample s;
    for (int64_t t = 0; t < ids.size(1); ++t) {
      if (mask[r][t].item<int64_t>() == 0) break;
      s.ids.push_back(ids[r][t].item<int64_t>());
      s.loss_mask.push_back(labels[r][t].item<int64_t>() != -100 ? 1 : 0);
    }
    return s;
  };
  std::vector<PreferencePair> pairs;
  for (int64_t i = 0; i < kPairs; ++i) pairs.push_back({row(i), row(kPairs + i), 0.0, {}, {}});
  return pairs;
}

TEST(PreferenceParity, ReferenceFromModelLoraOffAndPrecomputeAgree) {
  torch::set_num_threads(1);
  const MicroBatch batch = fixture_batch();
  DpoModels models;
  BackboneRunner runner(*models.engine, false);
  const torch::Tensor from_model = reference_logps(batch, "reference", *models.reference, false, runner);

  // The reference's weights with LoRA adapters whose B is not zero: on, they change the model.
  CausalLM adapted = causal_lm_from_pretrained(fixture() / "reference");
  LoraConfig lora;
  lora.rank = 4;
  lora.target_modules = {"q_proj", "v_proj", "down_proj"};
  apply_lora(*adapted->model, lora, 7);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : adapted->named_parameters()) {
      if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0.0, 0.5);
    }
  }
  models.engine->add_model("adapted", offload::group_parameters(*adapted, false), false);
  const torch::Tensor lora_off = reference_logps(batch, "adapted", *adapted, /*adapters_off=*/true, runner);
  const torch::Tensor lora_on = reference_logps(batch, "adapted", *adapted, /*adapters_off=*/false, runner);
  EXPECT_LE(max_error(lora_off, from_model), 1e-5);
  EXPECT_GT(max_error(lora_on, from_model), 1e-2) << "the adapters should change the log-probs when on";

  // Precomputed through the cache file, then read back from it.
  const fs::path cache = fs::temp_directory_path() / "ferry_reference_logps_test.safetensors";
  fs::remove(cache);
  std::vector<PreferencePair> train = pairs_of(batch), eval;
  std::ostringstream log;
  auto compute = [&](const MicroBatch& b) { return reference_logps(b, "reference", *models.reference, false, runner); };
  EXPECT_FALSE(fill_reference_logps(train, eval, cache, "reference", 2, 3, compute, log));
  std::vector<PreferencePair> again = pairs_of(batch);
  EXPECT_TRUE(fill_reference_logps(again, eval, cache, "reference", 2, 3, compute, log)) << log.str();
  for (int64_t i = 0; i < kPairs; ++i) {
    for (const auto* pairs : {&train, &again}) {
      EXPECT_NEAR(*(*pairs)[i].reference_chosen_logps, from_model[i].item<double>(), 1e-5);
      EXPECT_NEAR(*(*pairs)[i].reference_rejected_logps, from_model[kPairs + i].item<double>(), 1e-5);
    }
  }
  // Another reference identity is not served from the cache.
  std::vector<PreferencePair> other = pairs_of(batch);
  EXPECT_FALSE(fill_reference_logps(other, eval, cache, "another reference", 2, 3, compute, log));
  fs::remove(cache);
}

}  // namespace
}  // namespace ferry
