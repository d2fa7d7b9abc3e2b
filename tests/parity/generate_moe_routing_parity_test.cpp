// Routing identity on a Mixture of Experts (model_moe_ref.py's tiny Qwen3-MoE and Mixtral): the
// experts a GRPO-style rollout (sampled at temperature 1, KV cache, batched) sends every token to,
// on every sparse layer, are the experts the scoring forward (no gradient, the whole sequence at
// once) and the training forward (train mode, with gradient) send it to. Peers patch a mismatch
// between their inference engine and their trainer with routing replay; Ferry generates and trains
// with one engine, so the three must agree. Equal-length prompts: the prefill is compared too;
// left-padded prompts: every decode step (the prefill may be packed without the padding).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "src/generate/generate.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "src/model/router_load.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

fs::path model_folder(const std::string& family) {
  const fs::path folder = fs::path(FERRY_FIXTURES_DIR) / "model_moe" / family / "model";
  if (!fs::exists(folder / "config.json")) {
    ADD_FAILURE() << "missing " << folder << ": run `ctest -R parity_fixture_model_moe` first";
  }
  return folder;
}

std::shared_ptr<RouterLoad> tracing_load(const ModelShape& config) {
  auto load = std::make_shared<RouterLoad>(config.moe.num_experts, config.moe.experts_per_token, 0.0, torch::Tensor());
  load->keep_routing();
  return load;
}

// Experts chosen per (row, position) by one whole-sequence forward: layer -> (B, T, k), sorted along k.
std::map<int64_t, torch::Tensor> full_forward_routing(CausalLM& model, const torch::Tensor& tokens,
                                                       const torch::Tensor& mask, bool training) {
  const auto load = tracing_load(model->config());
  model->model->set_router_load(load);
  if (training) {
    model->train();
    model(tokens, mask).sum().backward();
    model->eval();
  } else {
    torch::NoGradGuard no_grad;
    model(tokens, mask);
  }
  model->model->set_router_load(nullptr);
  std::map<int64_t, torch::Tensor> out;
  for (const auto& [layer, calls] : load->chosen_experts()) {
    EXPECT_EQ(calls.size(), 1u);
    out[layer] = std::get<0>(calls.front().sort(-1)).reshape({tokens.size(0), tokens.size(1), -1});
  }
  return out;
}

struct Routing {
  int64_t compared = 0, differing = 0;
};

// Generates from `prompts` with the router traced, then compares with the scoring and training forwards.
Routing check_routing(const std::string& family, const torch::Tensor& prompts, const torch::Tensor& prompt_mask,
                      bool compare_prefill) {
  CausalLM model = causal_lm_from_pretrained(model_folder(family));
  const auto load = tracing_load(model->config());
  model->model->set_router_load(load);
  GenerateOptions options;
  options.max_new_tokens = 8;
  options.sampling.greedy = false;
  options.sampling.temperature = 1.0;
  options.seed = 3;
  const GenerateResult rollout = generate(*model, prompts, prompt_mask, options);
  model->model->set_router_load(nullptr);
  const int64_t b = prompts.size(0), tp = prompts.size(1), t_new = rollout.tokens.size(1) - tp;
  EXPECT_EQ(t_new, 8) << "no row may stop early (no EOS): every decode step has all rows";
  Routing routing;
  for (const bool training : {false, true}) {
    const std::map<int64_t, torch::Tensor> full = full_forward_routing(model, rollout.tokens, rollout.attention_mask, training);
    EXPECT_EQ(full.size(), load->chosen_experts().size());
    for (const auto& [layer, calls] : load->chosen_experts()) {
      const torch::Tensor& expected = full.at(layer);  // (B, T, k)
      // calls: the prefill, then one per decode step; the last sampled token is never fed back.
      EXPECT_EQ(static_cast<int64_t>(calls.size()), t_new) << "layer " << layer;
      const auto compare = [&](const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& keep) {
        const torch::Tensor same = (std::get<0>(got.sort(-1)) == want).all(-1);  // (rows)
        routing.compared += keep.sum().item<int64_t>();
        routing.differing += (same.logical_not() & keep).sum().item<int64_t>();
      };
      if (compare_prefill) {
        EXPECT_EQ(calls.front().size(0), b * tp) << "an unpacked prefill routes every prompt column";
        if (calls.front().size(0) != b * tp) return routing;
        compare(calls.front().reshape({b, tp, -1}).reshape({b * tp, -1}), expected.narrow(1, 0, tp).reshape({b * tp, -1}),
                prompt_mask.reshape({-1}).to(torch::kBool));
      }
      for (int64_t step = 1; step < static_cast<int64_t>(calls.size()); ++step) {
        EXPECT_EQ(calls[step].size(0), b) << "decode step " << step;
        if (calls[step].size(0) != b) return routing;
        compare(calls[step], expected.select(1, tp + step - 1), torch::ones({b}, torch::kBool));
      }
    }
  }
  return routing;
}

TEST(MoeRouting, RolloutScoringAndTrainingChooseTheSameExperts) {
  torch::manual_seed(11);
  for (const char* family : {"qwen3_moe", "mixtral"}) {
    // Equal lengths: 4 prompts of 9 tokens.
    const torch::Tensor prompts = torch::randint(4, 128, {4, 9}, torch::kLong);
    const Routing even = check_routing(family, prompts, torch::ones_like(prompts), /*compare_prefill=*/true);
    // Left-padded: rows of 9, 6 and 3 tokens.
    torch::Tensor padded = torch::randint(4, 128, {3, 9}, torch::kLong);
    torch::Tensor mask = torch::ones_like(padded);
    mask.index_put_({1, torch::indexing::Slice(0, 3)}, 0);
    mask.index_put_({2, torch::indexing::Slice(0, 6)}, 0);
    padded = padded.masked_fill(mask == 0, 0);
    const Routing left = check_routing(family, padded, mask, /*compare_prefill=*/false);
    EXPECT_GT(even.compared, 200);
    EXPECT_EQ(even.differing, 0) << family << ": equal-length prompts";
    EXPECT_EQ(left.differing, 0) << family << ": left-padded prompts";
    std::cout << family << ": " << even.compared + left.compared << " (token, layer) routings compared across rollout, "
              << "scoring and training forwards, " << even.differing + left.differing << " differ\n";
  }
}

}  // namespace
}  // namespace ferry
