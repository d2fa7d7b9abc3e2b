// Generation against transformers' generate: greedy decoding of the tiny models written by
// model_llama_ref.py and model_families_ref.py (Qwen3, SmolLM2-like, Mistral with and without a
// sliding window that the KV cache decodes past), batched, left-padded prompts, token for token,
// with and without EOS.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "src/generate/generate.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"

namespace ferry {
namespace {

struct Fixture {
  io::TensorMap expected;
  CausalLM model{nullptr};
};

// `name`: <fixture stem>/<model>, e.g. "model_llama/plain" or "model_families/qwen3".
Fixture load(const std::string& name) {
  const auto folder = std::filesystem::path(FERRY_FIXTURES_DIR) / name;
  if (!std::filesystem::exists(folder / "generate.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixtures` first";
  }
  return {io::load_safetensors(folder / "generate.safetensors"), causal_lm_from_pretrained(folder / "model")};
}

std::string model_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.find('/') + 1);
  for (char& c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
  }
  return name;
}

class GenerateParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerateParity, GreedyMatchesTransformers) {
  Fixture f = load(GetParam());
  const GenerateResult result = generate(*f.model, f.expected.at("prompt_ids"), f.expected.at("prompt_mask"),
                                         {.max_new_tokens = 20, .pad_token_id = 0});
  const torch::Tensor& expected = f.expected.at("greedy_free");
  ASSERT_EQ(result.tokens.sizes(), expected.sizes());
  EXPECT_TRUE(torch::equal(result.tokens, expected)) << "ferry\n" << result.tokens << "\ntransformers\n" << expected;
  EXPECT_LE((result.logprobs - f.expected.at("greedy_free_logprobs")).abs().max().item<double>(), 1e-4);
}

// Not for phi3_longrope: there row 0 stops before the batch crosses LongRoPE's original context.
// transformers keeps generating padding for it (attention mask 1), so its batch still counts row 0's
// length when it picks the long factors; Ferry drops stopped rows and counts the alive ones
// (docs/models.md). GreedyMatchesTransformers checks the crossing itself.
class GenerateStopParity : public GenerateParity {};

TEST_P(GenerateStopParity, GreedyStopsAtEosLikeTransformers) {
  Fixture f = load(GetParam());
  const int64_t eos = f.expected.at("eos_id")[0].item<int64_t>();
  const GenerateResult result = generate(*f.model, f.expected.at("prompt_ids"), f.expected.at("prompt_mask"),
                                         {.max_new_tokens = 20, .eos_token_ids = {eos}, .pad_token_id = 0});
  const torch::Tensor& expected = f.expected.at("greedy_eos");
  ASSERT_EQ(result.tokens.sizes(), expected.sizes());
  EXPECT_TRUE(torch::equal(result.tokens, expected)) << "ferry\n" << result.tokens << "\ntransformers\n" << expected;
  // The EOS id is row 0's 7th free token; row 0 ends at its first occurrence (the 7th new token
  // or, when the model produced that token before, earlier).
  const torch::Tensor free_row = f.expected.at("greedy_free")[0];
  int64_t first = 9;
  while (free_row[first].item<int64_t>() != eos) ++first;
  ASSERT_LE(first, 9 + 6);
  EXPECT_EQ(result.tokens[0][first].item<int64_t>(), eos);
  EXPECT_EQ(result.attention_mask[0][first + 1].item<int64_t>(), 0);  // nothing after it
}

const std::vector<std::string> kLlamaFixtures{"model_llama/plain", "model_llama/gqa_tied_llama3",
                                              "model_llama/bias_linear"};
const std::vector<std::string> kFamilyFixtures{
    "model_families/gemma2",      "model_families/gemma3",        "model_families/smollm3",
    "model_families/olmo2",       "model_families/olmo3",         "model_families/olmo3_yarn",
    "model_families/phi3",
    "model_families/phi3_longrope", "model_families/phi3_long_context", "model_families/qwen3",
    "model_families/qwen3_bias",  "model_families/smollm2",       "model_families/mistral",
    "model_families/mistral_window_big", "model_families/mistral_window_5"};

// kFamilyFixtures but phi3_longrope (see GenerateStopParity).
std::vector<std::string> stop_fixtures() {
  std::vector<std::string> out;
  for (const std::string& name : kFamilyFixtures) {
    if (name != "model_families/phi3_longrope") out.push_back(name);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Llama, GenerateParity, ::testing::ValuesIn(kLlamaFixtures), model_name);
INSTANTIATE_TEST_SUITE_P(Families, GenerateParity, ::testing::ValuesIn(kFamilyFixtures), model_name);
// Mixtures of Experts (model_moe_ref.py): Qwen3-MoE, Qwen2-MoE, Mixtral, OLMoE.
const std::vector<std::string> kMoeFixtures{"model_moe/qwen3_moe", "model_moe/qwen2_moe", "model_moe/mixtral",
                                            "model_moe/olmoe"};
INSTANTIATE_TEST_SUITE_P(Experts, GenerateParity, ::testing::ValuesIn(kMoeFixtures), model_name);
INSTANTIATE_TEST_SUITE_P(Llama, GenerateStopParity, ::testing::ValuesIn(kLlamaFixtures), model_name);
INSTANTIATE_TEST_SUITE_P(Families, GenerateStopParity, ::testing::ValuesIn(stop_fixtures()), model_name);

}  // namespace
}  // namespace ferry
