// KTO against TRL 1.16's own KTOTrainer (kto_loss_ref.py) on tiny random Llamas, fp32: the KL rows
// Ferry builds from a group of examples equal TRL's (completions rotated by one), the summed
// log-probs of rows and KL rows, the loss of every loss type and weighting, the logged values and
// the gradients — through the stage objective, BackboneRunner and the parameter engine; and the
// precomputed reference gives the frozen model's loss.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "offload/engine.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "stages/kto.h"
#include "tests/support/scratch_dir.h"
#include "train/backbone_runner.h"
#include "train/preference/kto_batches.h"
#include "train/preference/reference_logps_cache.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "kto_loss";
  if (!fs::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

constexpr int64_t kExamples = 4;

std::vector<int64_t> ids_of(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// The fixture's examples as Ferry's loader leaves them: prompt + completion, loss mask on the completion.
std::vector<UnpairedExample> fixture_examples() {
  const io::TensorMap t = io::load_safetensors(fixture() / "batch.safetensors");
  std::vector<UnpairedExample> examples;
  for (int64_t i = 0; i < kExamples; ++i) {
    const std::vector<int64_t> prompt = ids_of(t.at("prompt_ids_" + std::to_string(i)));
    const std::vector<int64_t> completion = ids_of(t.at("completion_ids_" + std::to_string(i)));
    UnpairedExample e;
    e.sample.ids = prompt;
    e.sample.ids.insert(e.sample.ids.end(), completion.begin(), completion.end());
    e.sample.loss_mask.assign(prompt.size(), 0);
    e.sample.loss_mask.resize(e.sample.ids.size(), 1);
    e.desirable = t.at("label")[i].item<int64_t>() != 0;
    examples.push_back(std::move(e));
  }
  return examples;
}

KtoGroups fixture_group() { return group_kto_examples(fixture_examples(), kExamples, 1000, false, 0); }

MicroBatch fixture_batch(const KtoGroups& group) { return collate_kto_rows(group, 0, kExamples, /*pad_id=*/3); }

double max_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach().to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

double scalar(const io::TensorMap& expected, const std::string& name) { return expected.at(name).item<double>(); }

struct KtoModels {
  CausalLM policy = causal_lm_from_pretrained(fixture() / "policy");
  CausalLM reference = causal_lm_from_pretrained(fixture() / "reference");
  std::unique_ptr<offload::ParameterEngine> engine = offload::make_parameter_engine(offload::EngineOptions{});
  KtoModels() {
    policy->train();
    for (auto& p : reference->parameters()) p.set_requires_grad(false);
    engine->add_model("policy", offload::group_parameters(*policy, false), true);
    engine->add_model("reference", offload::group_parameters(*reference, false), false);
  }
  // The mean loss over the examples and the logged values, as the loop computes them from the sums.
  std::pair<torch::Tensor, MetricValues> loss(const KtoConfig& settings, const MicroBatch& batch,
                                              ReferenceSource source = ReferenceSource::model) {
    KtoObjective objective(settings, source, "policy", *policy, "reference", reference.get());
    BackboneRunner runner(*engine, false);
    const LossSum sum = objective.loss(batch, runner);
    MetricValues means = sum.extra;
    for (auto& v : means) v.value /= static_cast<double>(batch.loss_weight);
    return {sum.sum / static_cast<double>(batch.loss_weight), means};
  }
};

KtoConfig kto(KtoLoss type, double beta, double desirable = 1.0, double undesirable = 1.0) {
  KtoConfig c;
  c.loss_type = type;
  c.beta = beta;
  c.desirable_weight = desirable;
  c.undesirable_weight = undesirable;
  return c;
}

TEST(KtoParity, KlRowsAreTrlsRotatedCompletions) {
  const io::TensorMap t = io::load_safetensors(fixture() / "batch.safetensors");
  const KtoGroups group = fixture_group();
  ASSERT_EQ(group.groups(), 1);
  for (int64_t i = 0; i < kExamples; ++i) {
    const TokenizedSample& kl = group.rows[static_cast<size_t>(i)].rejected;
    const int64_t length = t.at("KL_attention_mask")[i].sum().item<int64_t>();
    ASSERT_EQ(static_cast<int64_t>(kl.ids.size()), length) << "KL row " << i;
    for (int64_t c = 0; c < length; ++c) {
      EXPECT_EQ(kl.ids[static_cast<size_t>(c)], t.at("KL_input_ids")[i][c].item<int64_t>()) << i << "," << c;
      EXPECT_EQ(kl.loss_mask[static_cast<size_t>(c)], t.at("KL_completion_mask")[i][c].item<int64_t>()) << i << "," << c;
    }
    EXPECT_EQ(group.desirable[static_cast<size_t>(i)] != 0, t.at("label")[i].item<int64_t>() != 0);
  }
}

TEST(KtoParity, GroupsKeepALoneLastExampleWithItsNeighbours) {
  std::vector<UnpairedExample> examples = fixture_examples();
  examples.push_back(examples.front());
  const KtoGroups groups = group_kto_examples(examples, 2, 1000, false, 0);
  EXPECT_EQ(groups.begin, (std::vector<int64_t>{0, 2, 5}));
  // The shuffled grouping keeps every example exactly once.
  const KtoGroups shuffled = group_kto_examples(fixture_examples(), 2, 1000, true, 7);
  ASSERT_EQ(shuffled.rows.size(), static_cast<size_t>(kExamples));
  std::multiset<std::vector<int64_t>> before, after;
  for (const auto& e : fixture_examples()) before.insert(e.sample.ids);
  for (const auto& r : shuffled.rows) after.insert(r.chosen.ids);
  EXPECT_EQ(before, after);
}

TEST(KtoParity, LogpsOfRowsAndKlRowsMatchTrl) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  KtoModels models;
  const MicroBatch batch = fixture_batch(fixture_group());
  BackboneRunner runner(*models.engine, false);
  const torch::Tensor policy = reference_logps(batch, "policy", *models.policy, false, runner);
  const torch::Tensor reference = reference_logps(batch, "reference", *models.reference, false, runner);
  EXPECT_LE(max_error(policy.narrow(0, 0, kExamples), expected.at("logps")), 1e-4);
  EXPECT_LE(max_error(policy.narrow(0, kExamples, kExamples), expected.at("kl_logps")), 1e-4);
  EXPECT_LE(max_error(reference.narrow(0, 0, kExamples), expected.at("reference_logps")), 1e-4);
  EXPECT_LE(max_error(reference.narrow(0, kExamples, kExamples), expected.at("reference_kl_logps")), 1e-4);
}

TEST(KtoParity, EveryLossTypeAndWeightingMatchesTrl) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  KtoModels models;
  const MicroBatch batch = fixture_batch(fixture_group());
  for (const auto& [key, settings] : std::vector<std::pair<std::string, KtoConfig>>{
           {"loss.kto", kto(KtoLoss::kto, 0.1)},
           {"loss.kto_weighted", kto(KtoLoss::kto, 0.3, 1.33, 0.75)},
           {"loss.apo_zero_unpaired", kto(KtoLoss::apo_zero_unpaired, 0.1)}}) {
    torch::NoGradGuard no_grad;
    EXPECT_NEAR(models.loss(settings, batch).first.item<double>(), scalar(expected, key), 1e-5) << key;
  }
}

TEST(KtoParity, KtoMetricsAndGradientsMatchTrl) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  KtoModels models;
  models.engine->zero_grad();
  auto [loss, metrics] = models.loss(kto(KtoLoss::kto, 0.1), fixture_batch(fixture_group()));
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), scalar(expected, "loss.kto"), 1e-5);
  EXPECT_GT(scalar(expected, "kto.kl"), 0.0) << "a fixture whose KL estimate is not clamped to 0";
  for (const auto& [ours, trl] : std::vector<std::pair<std::string, std::string>>{
           {"kl", "kto.kl"},
           {"rewards/chosen", "kto.rewards_chosen"},
           {"rewards/rejected", "kto.rewards_rejected"},
           {"rewards/margins", "kto.rewards_margins"},
           {"logps/chosen", "kto.logps_chosen"},
           {"logps/rejected", "kto.logps_rejected"}}) {
    const auto value = find_metric(metrics, ours);
    ASSERT_TRUE(value.has_value()) << ours;
    EXPECT_NEAR(*value, scalar(expected, trl), 1e-4) << ours;
  }
  int checked = 0;
  for (const auto& item : models.policy->named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_LE(max_error(item.value().grad(), expected.at("grad.kto." + item.key())), 1e-5) << item.key();
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 2 * 9 + 1);
  for (const auto& p : models.reference->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(KtoParity, PrecomputedReferenceGivesTheFrozenModelsLoss) {
  torch::set_num_threads(1);
  const io::TensorMap expected = io::load_safetensors(fixture() / "expected.safetensors");
  KtoModels models;
  KtoGroups group = fixture_group();
  std::vector<PreferencePair> eval;
  BackboneRunner runner(*models.engine, false);
  const fs::path dir = test_support::process_scratch_dir("kto_parity");
  fs::create_directories(dir);
  const fs::path cache = dir / "reference_logps.safetensors";
  std::ostringstream log;
  fill_reference_logps(group.rows, eval, cache, "reference", 3, 3,
                       [&](const MicroBatch& b) { return reference_logps(b, "reference", *models.reference, false, runner); },
                       log);
  const MicroBatch batch = fixture_batch(group);
  ASSERT_TRUE(batch.tensors.count("reference_logps"));
  torch::NoGradGuard no_grad;
  const double got = models.loss(kto(KtoLoss::kto, 0.1), batch, ReferenceSource::precomputed).first.item<double>();
  EXPECT_NEAR(got, scalar(expected, "loss.kto"), 1e-5);
}

}  // namespace
}  // namespace ferry
