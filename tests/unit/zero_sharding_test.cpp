// ZeRO sharding in the parameter engines (distributed.zero_stage 1, 2 and 3), with two processes'
// engines in two threads joined over c10d Gloo, under offload policies none, optimizer and params:
// - both take the steps torch::optim::AdamW takes on the gradients summed over the two, and report
//   the global gradient norm of those sums;
// - each holds about half of the Adam moments (the engine's accountant), together all of them;
//   under stage 3 also about half of the weights' host copies;
// - the two shard files they save into one folder load into a one-process engine, which then takes
//   the reference's next step (a 2-process checkpoint resumes on 1 process).
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "offload/engine.h"
#include "offload/optimizer_state_file.h"
#include "tests/support/two_process_group.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using offload::MemoryCategory;
using offload::MemoryTier;

constexpr double kLr = 2e-2;
constexpr int kSteps = 3;

// A small model's trainable tensors in execution order: matrices (decayed) and norm vectors (not).
struct Tensors {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  Tensors() {
    at::Generator generator = at::detail::createCPUGenerator(7);  // threads: no global seed
    const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes{
        {"model.embed_tokens.weight", {32, 16}},
        {"model.layers.0.self_attn.q_proj.weight", {16, 16}},
        {"model.layers.0.input_layernorm.weight", {16}},
        {"model.layers.0.mlp.down_proj.weight", {16, 24}},  // frozen (made so below), in a trained chunk
        {"model.layers.1.mlp.up_proj.weight", {24, 16}},
        {"model.layers.1.post_attention_layernorm.weight", {16}},
        {"model.norm.weight", {16}},
        {"lm_head.weight", {32, 16}}};
    for (const auto& [name, shape] : shapes) {
      named.emplace_back(name, torch::randn(shape, generator).requires_grad_(name.find("down_proj") == std::string::npos));
    }
  }
  std::vector<offload::ParameterGroup> groups() const {
    std::vector<offload::ParameterGroup> out{{"embed", {named[0]}}, {"layers.0", {named[1], named[2], named[3]}},
                                    {"layers.1", {named[4], named[5]}}, {"head", {named[6], named[7]}}};
    return out;
  }
  int64_t trainable_numel() const {
    int64_t n = 0;
    for (const auto& [name, t] : named) n += t.requires_grad() ? t.numel() : 0;
    return n;
  }
};

// Process `rank`'s loss at `step`: a different linear term per process and step, plus 0.5 |p|^2.
torch::Tensor loss_of(const Tensors& model, int64_t rank, int step) {
  torch::Tensor loss = torch::zeros({});
  for (size_t i = 0; i < model.named.size(); ++i) {
    const torch::Tensor& p = model.named[i].second;
    at::Generator generator = at::detail::createCPUGenerator(1000 * step + 100 * rank + static_cast<uint64_t>(i));
    loss = loss + (p * torch::randn(p.sizes(), generator)).sum() + 0.5 * p.pow(2).sum();
  }
  return loss;
}

offload::EngineOptions options_for(OffloadPolicy policy) {
  offload::EngineOptions o;
  o.policy = policy;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.weight_decay = 0.1;
  o.device = c10::Device(c10::kCPU);
  return o;
}

// torch::optim::AdamW over the same tensors, decay on matrices only.
struct Reference {
  Tensors model;
  std::unique_ptr<torch::optim::AdamW> adam;
  Reference() {
    std::vector<torch::Tensor> matrices, vectors;
    for (const auto& [name, t] : model.named) {
      if (t.requires_grad()) (t.dim() == 2 ? matrices : vectors).push_back(t);
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    const auto opts = [](double decay) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(kLr).betas({0.9, 0.95}).eps(1e-8).weight_decay(decay));
    };
    groups.emplace_back(matrices, opts(0.1));
    groups.emplace_back(vectors, opts(0.0));
    adam = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(kLr));
  }
  // One step on the loss summed over both processes; returns the gradient norm.
  double step(int s) {
    adam->zero_grad();
    (loss_of(model, 0, s) + loss_of(model, 1, s)).backward();
    double squares = 0;
    for (const auto& [name, t] : model.named) squares += t.requires_grad() ? t.grad().pow(2).sum().item<double>() : 0.0;
    adam->step();
    return std::sqrt(squares);
  }
};

// One engine step of process `rank` (every process calls it).
double engine_step(offload::ParameterEngine& engine, const Tensors& model, int64_t rank, int s) {
  engine.zero_grad();
  engine.make_resident({"policy"});
  loss_of(model, rank, s).backward();
  engine.finish_gradients();
  engine.reduce_gradients();
  const double norm = engine.gradient_norm();
  engine.step(kLr, 1.0);
  return norm;
}

void expect_weights(offload::ParameterEngine& engine, const Tensors& ours, const Tensors& reference,
                    const std::string& what) {
  engine.with_weights("policy", offload::ParameterEngine::WeightAccess::read, [&] {
    for (size_t i = 0; i < ours.named.size(); ++i) {
      EXPECT_TRUE(torch::allclose(ours.named[i].second, reference.named[i].second, 1e-5, 1e-6))
          << what << ": " << ours.named[i].first << " differs by "
          << (ours.named[i].second - reference.named[i].second).abs().max().item<double>();
    }
  });
}

struct Case {
  OffloadPolicy policy;
  int64_t zero_stage;
};

class ZeroSharding : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroSharding, TwoProcessesStepLikeAdamWOnSummedGradientsHoldingHalfTheMoments) {
  if (!dist::gloo_compiled_in()) {
    GTEST_SKIP() << "[needs gloo] built without the Gloo headers (apt-get install libgloo-dev)";
  }
  const Case c = GetParam();
  const std::string name = std::string(enum_name(c.policy)) + " zero_stage " + std::to_string(c.zero_stage);
  const fs::path dir = fs::temp_directory_path() / ("ferry_zero_" + std::to_string(::getpid()) + "_" +
                                                    std::string(enum_name(c.policy)) + std::to_string(c.zero_stage));
  fs::remove_all(dir);
  fs::create_directories(dir);

  Reference reference;
  std::vector<double> reference_norms;
  for (int s = 0; s < kSteps; ++s) reference_norms.push_back(reference.step(s));

  const MemoryTier tier = c.policy == OffloadPolicy::none ? MemoryTier::device : MemoryTier::host;
  uint64_t moments[2] = {0, 0}, host_weights[2] = {0, 0};
  ferry_test::run_two_processes([&](int64_t rank, dist::Communicator& comm) {
    offload::EngineOptions options = options_for(c.policy);
    options.shard_group = &comm;
    options.zero_stage = c.zero_stage;
    Tensors model;
    auto engine = offload::make_parameter_engine(options);
    engine->add_model("policy", model.groups(), true);
    for (int s = 0; s < kSteps; ++s) {
      const double norm = engine_step(*engine, model, rank, s);
      EXPECT_NEAR(norm, reference_norms[static_cast<size_t>(s)], 1e-5 * reference_norms[static_cast<size_t>(s)])
          << name << ", rank " << rank << ", step " << s;
    }
    expect_weights(*engine, model, reference.model, name + ", rank " + std::to_string(rank));
    moments[rank] = engine->accountant().current(tier, MemoryCategory::moments);
    host_weights[rank] = engine->accountant().current(MemoryTier::host, MemoryCategory::weights);
    engine->save_state(dir);
    comm.barrier();
  });

  Tensors whole;
  const uint64_t all_moments = 8 * static_cast<uint64_t>(whole.trainable_numel());
  EXPECT_EQ(moments[0] + moments[1], all_moments) << name;
  // Stages 1-2 balance the trainable bytes; stage 3 the chunks' bytes, frozen weights included
  // (checked below), so its moments need not be even.
  if (c.zero_stage < 3) {
    for (uint64_t m : moments) EXPECT_LE(m, all_moments * 6 / 10) << name << ": not sharded evenly";
  }
  EXPECT_TRUE(fs::exists(dir / "optimizer_state.shard-0-of-2.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "optimizer_state.shard-1-of-2.safetensors"));

  // The two shards resume on one process: its next step is the reference's.
  auto single = offload::make_parameter_engine(options_for(c.policy));
  single->add_model("policy", whole.groups(), true);
  // The weights' host copies (the chunks, alignment included): sharded under stage 3 only.
  const uint64_t all_weights = single->accountant().current(MemoryTier::host, MemoryCategory::weights);
  if (c.zero_stage == 3) {
    EXPECT_EQ(host_weights[0] + host_weights[1], all_weights) << name;
    for (uint64_t w : host_weights) EXPECT_LE(w, all_weights * 6 / 10) << name << ": weights not sharded evenly";
  } else {
    for (uint64_t w : host_weights) EXPECT_EQ(w, all_weights) << name;
  }
  single->with_weights("policy", offload::ParameterEngine::WeightAccess::write, [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < whole.named.size(); ++i) whole.named[i].second.copy_(reference.model.named[i].second);
  });
  single->load_state(dir);
  EXPECT_EQ(single->step_count("policy"), kSteps);
  single->zero_grad();
  single->make_resident({"policy"});
  (loss_of(whole, 0, kSteps) + loss_of(whole, 1, kSteps)).backward();
  single->finish_gradients();
  single->step(kLr, 1.0);
  reference.step(kSteps);
  expect_weights(*single, whole, reference.model, name + ", resumed on one process");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Policies, ZeroSharding,
                         ::testing::Values(Case{OffloadPolicy::none, 1}, Case{OffloadPolicy::none, 2},
                                           Case{OffloadPolicy::optimizer, 1}, Case{OffloadPolicy::optimizer, 2},
                                           Case{OffloadPolicy::params, 2}, Case{OffloadPolicy::optimizer, 3},
                                           Case{OffloadPolicy::params, 3}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(enum_name(info.param.policy)) + "_stage" +
                                  std::to_string(info.param.zero_stage);
                         });

// A missing shard is named, not silently skipped.
TEST(ZeroShardFiles, AMissingShardIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("ferry_zero_missing_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<offload::ParameterStateRef> refs{{"policy", "w", torch::zeros({2}), torch::zeros({2}), {}}};
  offload::save_optimizer_state(dir, "none", refs, {{"policy", 1}}, {0, 2});
  std::map<std::string, int64_t> steps{{"policy", 0}};
  try {
    offload::load_optimizer_state(dir, refs, steps);
    FAIL() << "loaded with a shard missing";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_state.shard-1-of-2.safetensors"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
