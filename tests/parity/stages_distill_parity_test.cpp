// On-policy distillation against TRL 1.16's GKD divergence (gkd_loss_ref.py: GKDTrainer.
// generalized_jsd_loss on the logits of a tiny random student and a larger teacher sharing its
// vocabulary), fp32: the loss for six (beta, temperature) settings, including both KL ends, and the
// student's gradients — through the stage objective, BackboneRunner and the parameter engine, under
// `none` and with every group paged (`params`). Also: the on-policy micro-batch holds the student's
// own answers after each row's prompt, labelled on them alone, and is the same every time it is drawn.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "offload/engine.h"
#include "src/data/token_batch.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "stages/distill.h"
#include "train/backbone_runner.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "gkd_loss";
  if (!fs::exists(folder / "expected.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture` first";
  }
  return folder;
}

MicroBatch fixture_batch() {
  const io::TensorMap t = io::load_safetensors(fixture() / "batch.safetensors");
  MicroBatch batch;
  for (const char* name : {"input_ids", "attention_mask", "position_ids", "labels"}) batch.tensors[name] = t.at(name);
  batch.loss_weight = 1;
  return batch;
}

double expected(const std::string& name) {
  static const io::TensorMap values = io::load_safetensors(fixture() / "expected.safetensors");
  return values.at(name).item<double>();
}

struct DistillModels {
  CausalLM student = causal_lm_from_pretrained(fixture() / "student");
  CausalLM teacher = causal_lm_from_pretrained(fixture() / "teacher");
  std::unique_ptr<offload::ParameterEngine> engine;
  explicit DistillModels(OffloadPolicy policy = OffloadPolicy::none) {
    offload::EngineOptions options;
    options.policy = policy;
    engine = offload::make_parameter_engine(options);
    student->train();
    for (auto& p : teacher->parameters()) p.set_requires_grad(false);
    engine->add_model("policy", offload::group_parameters(*student, false), true);
    engine->add_model("teacher", offload::group_parameters(*teacher, false), false);
  }
  DistillObjective objective(double beta, double temperature, double lmbda = 0.0) {
    DistillConfig settings;
    settings.beta = beta;
    settings.temperature = temperature;
    settings.lmbda = lmbda;
    GenerateOptions generation;
    generation.max_new_tokens = 4;
    generation.eos_token_ids = {2};
    generation.pad_token_id = 3;
    return DistillObjective(settings, *engine, "policy", *student, "teacher", *teacher, generation, 3, 5);
  }
};

TEST(DistillParity, EveryBetaAndTemperatureMatchesTrl) {
  torch::set_num_threads(1);
  for (const OffloadPolicy policy : {OffloadPolicy::none, OffloadPolicy::params}) {
    DistillModels models(policy);
    BackboneRunner runner(*models.engine, false);
    for (const auto& [beta, temperature, key] : std::vector<std::tuple<double, double, std::string>>{
             {0.5, 1.0, "loss.beta0.5.t1"}, {0.0, 1.0, "loss.beta0.t1"},     {1.0, 1.0, "loss.beta1.t1"},
             {0.1, 1.0, "loss.beta0.1.t1"}, {0.5, 0.7, "loss.beta0.5.t0.7"}, {0.9, 2.0, "loss.beta0.9.t2"}}) {
      torch::NoGradGuard no_grad;
      const LossSum loss = models.objective(beta, temperature).loss(fixture_batch(), runner);
      EXPECT_NEAR(loss.sum.item<double>(), expected(key), 1e-5) << key << " under " << enum_name(policy);
      EXPECT_EQ(*find_metric(loss.extra, "on_policy"), 0.0);
    }
  }
}

TEST(DistillParity, StudentGradientsMatchTrl) {
  torch::set_num_threads(1);
  static const io::TensorMap want = io::load_safetensors(fixture() / "expected.safetensors");
  // Under params the head runs again in backward, after loss() has returned (what it holds must live on).
  for (const OffloadPolicy policy : {OffloadPolicy::none, OffloadPolicy::params}) {
    DistillModels models(policy);
    BackboneRunner runner(*models.engine, false);
    models.engine->zero_grad();
    {
      DistillObjective objective = models.objective(0.5, 1.0);
      objective.loss(fixture_batch(), runner).sum.backward();
    }
    models.engine->finish_gradients();
    double want_norm = 0;
    for (const auto& item : models.student->named_parameters()) {
      want_norm += want.at("grad." + item.key()).to(torch::kDouble).pow(2).sum().item<double>();
    }
    // Under params the gradients live in the engine's host buffers: their global norm is compared.
    EXPECT_NEAR(models.engine->gradient_norm({"policy"}), std::sqrt(want_norm), 1e-5 * std::sqrt(want_norm))
        << enum_name(policy);
    if (policy != OffloadPolicy::none) continue;
    int checked = 0;
    for (const auto& item : models.student->named_parameters()) {
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      EXPECT_LE((item.value().grad() - want.at("grad." + item.key())).abs().max().item<double>(), 1e-5) << item.key();
      ++checked;
    }
    EXPECT_EQ(checked, 2 + 2 * 9 + 1);
    for (const auto& p : models.teacher->parameters()) EXPECT_FALSE(p.grad().defined());
  }
}

TEST(DistillParity, OnPolicyAnswersFollowEachPromptAndRepeat) {
  torch::set_num_threads(1);
  DistillModels models;
  DistillObjective objective = models.objective(0.5, 1.0, /*lmbda=*/1.0);
  const MicroBatch batch = fixture_batch();
  EXPECT_TRUE(objective.draws_on_policy(batch));
  EXPECT_FALSE(models.objective(0.5, 1.0, 0.0).draws_on_policy(batch));
  const MicroBatch first = objective.on_policy_batch(batch), again = objective.on_policy_batch(batch);
  EXPECT_TRUE(first.at("input_ids").equal(again.at("input_ids"))) << "a redrawn micro-batch samples the same answers";
  const torch::Tensor ids = first.at("input_ids"), labels = first.at("labels"), mask = first.at("attention_mask");
  const torch::Tensor given = batch.at("input_ids"), given_labels = batch.at("labels");
  // Every row's answer starts at the left-padded prompt width p.
  const int64_t p = labels[0].ne(kIgnoreLabel).to(torch::kLong).argmax().item<int64_t>();
  for (int64_t row = 0; row < ids.size(0); ++row) {
    const int64_t prompt = given_labels[row].ne(kIgnoreLabel).to(torch::kLong).argmax().item<int64_t>();
    EXPECT_TRUE(ids[row].narrow(0, p - prompt, prompt).equal(given[row].narrow(0, 0, prompt))) << row;
    const torch::Tensor labelled = labels[row].ne(kIgnoreLabel);
    EXPECT_TRUE(labelled.equal(mask[row].to(torch::kBool) & torch::arange(ids.size(1)).ge(p))) << row;
    EXPECT_GT(labelled.sum().item<int64_t>(), 0) << row;
  }
}

}  // namespace
}  // namespace ferry
