// DiLoCo's outer step (train/diloco.h) with two processes' engines in two threads over c10d
// Gloo, against the formula written out in plain libtorch: after local moves θ_r, every process
// holds θ_outer − lr·(Δ̄ + μ·b) with b = μ·b + Δ̄, Δ̄ the mean of θ_outer − θ_r, over two outer steps
// (the momentum carries over). fp32 exactly as torch computes it; bf16 and int8 pseudo-gradients
// within their rounding. Also: the bytes each format hands to the collectives, and the momentum
// saved and loaded.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <filesystem>

#include "offload/engine.h"
#include "tests/support/two_process_group.h"
#include "train/diloco.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

constexpr double kOuterLr = 0.7, kMomentum = 0.9;

std::vector<torch::Tensor> initial_weights() {
  at::Generator g = at::detail::createCPUGenerator(3);
  return {torch::randn({40, 16}, g), torch::randn({16}, g), torch::randn({300}, g)};
}

// Where process `rank`'s inner steps take the weights in outer round `round`.
std::vector<torch::Tensor> local_move(const std::vector<torch::Tensor>& from, int64_t rank, int round) {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < from.size(); ++i) {
    at::Generator g = at::detail::createCPUGenerator(100 * round + 10 * rank + static_cast<uint64_t>(i));
    out.push_back(from[i] - 0.01 * torch::randn(from[i].sizes(), g));
  }
  return out;
}

struct Outcome {
  std::vector<torch::Tensor> weights[2];
  uint64_t bytes[2] = {0, 0};
};

Outcome run_diloco(PseudoGradient format, const fs::path& save_dir) {
  Outcome outcome;
  ferry_test::run_two_processes([&](int64_t rank, dist::Communicator& comm) {
    DistributedConfig config;
    config.mode = DistributedMode::diloco;
    config.outer_lr = kOuterLr;
    config.outer_momentum = kMomentum;
    config.pseudo_gradient = format;
    std::vector<torch::Tensor> weights = initial_weights();
    for (auto& w : weights) w.requires_grad_(true);
    offload::EngineOptions options;
    options.device = c10::Device(c10::kCPU);
    auto engine = offload::make_parameter_engine(options);
    engine->add_model("policy", {{"layers.0", {{"a.weight", weights[0]}, {"a.norm", weights[1]}, {"b.weight", weights[2]}}}},
                      true);
    DiLoCo diloco(config, comm, *engine, "policy");
    diloco.start();
    for (int round = 0; round < 2; ++round) {
      engine->with_weights("policy", offload::ParameterEngine::WeightAccess::write, [&] {
        torch::NoGradGuard no_grad;
        const std::vector<torch::Tensor> moved = local_move(
            {weights[0].detach().clone(), weights[1].detach().clone(), weights[2].detach().clone()}, rank, round);
        for (size_t i = 0; i < weights.size(); ++i) weights[i].copy_(moved[i]);
      });
      const uint64_t before = comm.payload_bytes();
      diloco.synchronize();
      outcome.bytes[rank] = comm.payload_bytes() - before;
    }
    EXPECT_EQ(diloco.outer_steps(), 2);
    for (const auto& w : weights) outcome.weights[rank].push_back(w.detach().clone());
    if (!save_dir.empty() && rank == 0) {
      diloco.save(save_dir);
      DiLoCo loaded(config, comm, *engine, "policy");
      loaded.start();
      loaded.load(save_dir);
      EXPECT_EQ(loaded.outer_steps(), 2);
    }
  });
  return outcome;
}

// The outer steps written out: torch.optim.SGD(nesterov=True) on the mean pseudo-gradient.
std::vector<torch::Tensor> reference_weights() {
  std::vector<torch::Tensor> outer = initial_weights();
  std::vector<torch::Tensor> momentum;
  for (const auto& w : outer) momentum.push_back(torch::zeros_like(w));
  for (int round = 0; round < 2; ++round) {
    const auto a = local_move(outer, 0, round), b = local_move(outer, 1, round);
    for (size_t i = 0; i < outer.size(); ++i) {
      const torch::Tensor mean = ((outer[i] - a[i]) + (outer[i] - b[i])) / 2.0;
      momentum[i] = kMomentum * momentum[i] + mean;
      outer[i] = outer[i] - kOuterLr * (mean + kMomentum * momentum[i]);
    }
  }
  return outer;
}

TEST(DiLoCo, OuterNesterovStepOnTheMeanPseudoGradient) {
  if (!dist::gloo_compiled_in()) {
    GTEST_SKIP() << "[needs gloo] built without the Gloo headers (apt-get install libgloo-dev)";
  }
  const std::vector<torch::Tensor> expected = reference_weights();
  const int64_t values = 40 * 16 + 16 + 300;
  const fs::path dir = fs::temp_directory_path() / ("ferry_diloco_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Format {
    PseudoGradient format;
    double tolerance;        // of the weights, absolute (the local moves are ~0.01)
    uint64_t bytes_per_sync;  // handed to collectives by one process
  };
  const std::vector<Format> formats{
      {PseudoGradient::fp32, 1e-6, 4 * static_cast<uint64_t>(values)},
      {PseudoGradient::bf16, 2e-4, 2 * static_cast<uint64_t>(values)},
      // codes, padded to whole blocks of 256, and one fp32 scale per block
      {PseudoGradient::int8, 1e-3, 4 * 256 + 4 * 4}};
  for (const Format& f : formats) {
    const std::string what(enum_name(f.format));
    const Outcome got = run_diloco(f.format, f.format == PseudoGradient::fp32 ? dir : fs::path());
    for (int rank = 0; rank < 2; ++rank) {
      ASSERT_EQ(got.weights[rank].size(), expected.size());
      EXPECT_EQ(got.bytes[rank], f.bytes_per_sync) << what;
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(torch::allclose(got.weights[rank][i], expected[i], 0, f.tolerance))
            << what << ", rank " << rank << ", tensor " << i << ": off by "
            << (got.weights[rank][i] - expected[i]).abs().max().item<double>();
        // Every process holds the same weights, bit for bit.
        EXPECT_TRUE(torch::equal(got.weights[rank][i], got.weights[0][i])) << what;
      }
    }
  }
  EXPECT_TRUE(fs::exists(dir / DiLoCo::kStateFile));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
