// The parameter engine's `none` policy (PlainEngine) against torch::optim::AdamW (libtorch's plain
// implementation): fp32 updates with decoupled weight decay only on matrices and a gradient
// multiplier, fp32 master weights for bf16 models, exact save/load of the optimizer state, the
// global gradient norm, and the grouping of a Llama model's parameters.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "core/error.h"
#include "offload/engine.h"
#include "offload/plain_engine.h"
#include "src/model/model_heads.h"

namespace ferry {
namespace {

// A matrix (decayed) and a vector (not decayed: a norm weight), as named in a model.
struct TwoParameters {
  torch::Tensor matrix = torch::randn({8, 5}).requires_grad_(true);
  torch::Tensor vector = torch::randn({5}).requires_grad_(true);
  std::vector<offload::ParameterGroup> groups() const {
    return {offload::ParameterGroup{"layers.0", {{"model.layers.0.mlp.up_proj.weight", matrix},
                                        {"model.layers.0.input_layernorm.weight", vector}}}};
  }
};

offload::EngineOptions adam_options() {
  offload::EngineOptions o;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  return o;
}

TEST(PlainEngine, Fp32StepsMatchTorchAdamW) {
  torch::manual_seed(0);
  TwoParameters ours;
  torch::Tensor ref_matrix = ours.matrix.detach().clone().requires_grad_(true);
  torch::Tensor ref_vector = ours.vector.detach().clone().requires_grad_(true);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{ref_matrix},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(3e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1)));
  groups.emplace_back(std::vector<torch::Tensor>{ref_vector},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(3e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0)));
  torch::optim::AdamW reference(groups, torch::optim::AdamWOptions(3e-2));

  auto engine = offload::make_parameter_engine(adam_options());
  engine->add_model("policy", ours.groups(), true);
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor gm = torch::randn({8, 5}), gv = torch::randn({5});
    const double multiplier = 0.5 + 0.25 * step;
    ours.matrix.mutable_grad() = gm.clone();
    ours.vector.mutable_grad() = gv.clone();
    ref_matrix.mutable_grad() = gm * multiplier;
    ref_vector.mutable_grad() = gv * multiplier;
    engine->step(3e-2, multiplier);
    reference.step();
  }
  EXPECT_LE((ours.matrix - ref_matrix).abs().max().item<double>(), 1e-6);
  EXPECT_LE((ours.vector - ref_vector).abs().max().item<double>(), 1e-6);
  EXPECT_EQ(engine->step_count("policy"), 3);
}

TEST(PlainEngine, KeepsTheWeightsInOnePageAlignedBuffer) {
  TwoParameters ours;
  const torch::Tensor matrix = ours.matrix.detach().clone(), vector = ours.vector.detach().clone();
  auto engine = offload::make_parameter_engine(adam_options());
  engine->add_model("policy", ours.groups(), true);
  EXPECT_EQ(ours.matrix.storage().data(), ours.vector.storage().data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ours.matrix.data_ptr()) % 4096, 0u);
  EXPECT_TRUE(torch::equal(ours.matrix, matrix));
  EXPECT_TRUE(torch::equal(ours.vector, vector));
  // A quantised base (integer tensors among the weights) is left as it is.
  TwoParameters other;
  std::vector<offload::ParameterGroup> groups = other.groups();
  groups[0].parameters.emplace_back("model.layers.0.mlp.down_proj.nf4.codes", torch::zeros({16}, torch::kUInt8));
  engine->add_model("frozen", groups, false);
  EXPECT_NE(other.matrix.storage().data(), other.vector.storage().data());
}

TEST(PlainEngine, Bf16ModelKeepsFp32MasterWeights) {
  torch::manual_seed(1);
  const torch::Tensor start = torch::randn({16, 4});
  torch::Tensor low = start.to(torch::kBFloat16).requires_grad_(true);
  torch::Tensor full = low.detach().to(torch::kFloat).requires_grad_(true);  // fp32 run from the same start
  offload::EngineOptions options = adam_options();
  options.precision = Precision::bf16;
  auto low_engine = offload::make_parameter_engine(options);
  low_engine->add_model("m", {offload::ParameterGroup{"head", {{"lm_head.weight", low}}}}, true);
  auto full_engine = offload::make_parameter_engine(adam_options());
  full_engine->add_model("m", {offload::ParameterGroup{"head", {{"lm_head.weight", full}}}}, true);
  for (int step = 0; step < 20; ++step) {
    const torch::Tensor g = torch::randn({16, 4}).to(torch::kBFloat16);
    low.mutable_grad() = g;
    full.mutable_grad() = g.to(torch::kFloat);
    low_engine->step(1e-4, 1.0);
    full_engine->step(1e-4, 1.0);
  }
  // 20 updates of ~1e-4 would mostly vanish in bf16 arithmetic; with master weights the bf16 model
  // is the fp32 run rounded once.
  EXPECT_TRUE(torch::equal(low.detach(), full.detach().to(torch::kBFloat16)));
  EXPECT_GT((full.detach() - start.to(torch::kBFloat16).to(torch::kFloat)).abs().max().item<double>(), 1e-3);
}

TEST(PlainEngine, SavedStateResumesExactly) {
  torch::manual_seed(2);
  TwoParameters a;
  auto engine_a = offload::make_parameter_engine(adam_options());
  engine_a->add_model("policy", a.groups(), true);
  for (int step = 0; step < 2; ++step) {
    a.matrix.mutable_grad() = torch::randn({8, 5});
    a.vector.mutable_grad() = torch::randn({5});
    engine_a->step(1e-2, 1.0);
  }
  const auto dir = std::filesystem::temp_directory_path() / ("ferry_engine_state_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  engine_a->save_state(dir);

  TwoParameters b;
  {
    torch::NoGradGuard no_grad;
    b.matrix.copy_(a.matrix);
    b.vector.copy_(a.vector);
  }
  auto engine_b = offload::make_parameter_engine(adam_options());
  engine_b->add_model("policy", b.groups(), true);
  engine_b->load_state(dir);
  EXPECT_EQ(engine_b->step_count("policy"), 2);
  const torch::Tensor gm = torch::randn({8, 5}), gv = torch::randn({5});
  a.matrix.mutable_grad() = gm.clone();
  a.vector.mutable_grad() = gv.clone();
  b.matrix.mutable_grad() = gm.clone();
  b.vector.mutable_grad() = gv.clone();
  engine_a->step(1e-2, 1.0);
  engine_b->step(1e-2, 1.0);
  EXPECT_TRUE(torch::equal(a.matrix, b.matrix));
  EXPECT_TRUE(torch::equal(a.vector, b.vector));

  // A state for another model shape is refused before anything changes.
  TwoParameters other;
  other.matrix = torch::randn({3, 3}).requires_grad_(true);
  auto engine_c = offload::make_parameter_engine(adam_options());
  engine_c->add_model("policy", other.groups(), true);
  EXPECT_THROW(engine_c->load_state(dir), InputError);
  EXPECT_THROW(engine_c->load_state(dir / "nowhere"), InputError);
  std::filesystem::remove(dir / offload::kOptimizerStateFile);
  std::filesystem::remove(dir);
}

TEST(PlainEngine, GradientNormIsTheGlobalL2AndSeesInfinities) {
  TwoParameters p;
  p.matrix.mutable_grad() = torch::full({8, 5}, 0.5);
  p.vector.mutable_grad() = torch::full({5}, 2.0);
  auto engine = offload::make_parameter_engine(adam_options());
  engine->add_model("policy", p.groups(), true);
  EXPECT_NEAR(engine->gradient_norm(), std::sqrt(40 * 0.25 + 5 * 4.0), 1e-6);  // per-tensor norms in fp32
  EXPECT_TRUE(engine->gradients_finite());
  p.vector.mutable_grad()[2] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(engine->gradients_finite());
  engine->zero_grad();
  EXPECT_FALSE(p.matrix.grad().defined());
}

// The offloading engines hold master weights, moments and gradient sums on the host: a model whose
// host state does not fit offload.host_memory is refused before anything is allocated, by name.
TEST(ChunkedEngine, ModelOverTheHostBudgetIsAConfigErrorNamingIt) {
  TwoParameters ours;  // 45 fp32 parameters: 180 B of chunks (256-aligned) + 45 x 12 B of state
  offload::EngineOptions options = adam_options();
  options.policy = OffloadPolicy::optimizer;
  options.host_budget = 600;
  auto engine = offload::make_parameter_engine(options);
  try {
    engine->add_model("policy", ours.groups(), true);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("offload.host_memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model 'policy' needs"), std::string::npos) << e.what();
  }
  options.host_budget = 4096;
  auto roomy = offload::make_parameter_engine(options);
  roomy->add_model("policy", ours.groups(), true);
  EXPECT_LE(roomy->accountant().current(offload::MemoryTier::host), 4096u);
  EXPECT_GT(roomy->accountant().current(offload::MemoryTier::host), 600u);
}

TEST(ParameterEngine, GroupsFollowExecutionOrderAndEveryPolicyHasAnEngine) {
  ModelShape shape;
  shape.vocab_size = 32;
  shape.hidden_size = 16;
  shape.intermediate_size = 32;
  shape.num_hidden_layers = 3;
  shape.num_attention_heads = 2;
  shape.num_key_value_heads = 2;
  shape.head_dim = 8;
  CausalLM model(shape);
  const auto groups = offload::group_parameters(*model, false);
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups[0].name, "embed");
  EXPECT_EQ(groups[1].name, "layers.0");
  EXPECT_EQ(groups[3].name, "layers.2");
  EXPECT_EQ(groups[4].name, "head");
  EXPECT_EQ(groups[1].parameters.size(), 9u);  // q k v o, gate up down, two norms
  EXPECT_EQ(groups[4].parameters.size(), 2u);  // final norm, lm_head
  model->model->embed_tokens->weight.set_requires_grad(false);
  EXPECT_EQ(offload::group_parameters(*model, true).front().name, "layers.0");

  EXPECT_TRUE(groups[4].also_uses.empty());
  ModelShape tied_shape = shape;
  tied_shape.tie_word_embeddings = true;
  CausalLM tied(tied_shape);
  EXPECT_EQ(offload::group_parameters(*tied, false).back().also_uses, std::vector<std::string>{"embed"});

  offload::EngineOptions options;
  for (OffloadPolicy policy : {OffloadPolicy::none, OffloadPolicy::optimizer, OffloadPolicy::params}) {
    options.policy = policy;
    EXPECT_NE(offload::make_parameter_engine(options), nullptr);
  }
  options.policy = OffloadPolicy::auto_;  // must be resolved into a plan first (offload/auto_policy.h)
  EXPECT_THROW(offload::make_parameter_engine(options), InternalError);
}

}  // namespace
}  // namespace ferry
