// Generation against transformers' generate: greedy decoding of the tiny models written by
// model_llama_ref.py (batched, left-padded prompts), token for token, with and without EOS.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>

#include "src/generate/generate.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"

namespace ferry {
namespace {

struct Fixture {
  io::TensorMap expected;
  LlamaForCausalLM model{nullptr};
};

Fixture load(const std::string& name) {
  const auto folder = std::filesystem::path(FERRY_FIXTURES_DIR) / "model_llama" / name;
  if (!std::filesystem::exists(folder / "generate.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixtures` first";
  }
  return {io::load_safetensors(folder / "generate.safetensors"), causal_lm_from_pretrained(folder / "model")};
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

TEST_P(GenerateParity, GreedyStopsAtEosLikeTransformers) {
  Fixture f = load(GetParam());
  const int64_t eos = f.expected.at("eos_id")[0].item<int64_t>();
  const GenerateResult result = generate(*f.model, f.expected.at("prompt_ids"), f.expected.at("prompt_mask"),
                                         {.max_new_tokens = 20, .eos_token_ids = {eos}, .pad_token_id = 0});
  const torch::Tensor& expected = f.expected.at("greedy_eos");
  ASSERT_EQ(result.tokens.sizes(), expected.sizes());
  EXPECT_TRUE(torch::equal(result.tokens, expected)) << "ferry\n" << result.tokens << "\ntransformers\n" << expected;
  EXPECT_EQ(result.tokens[0][9 + 6].item<int64_t>(), eos);
  EXPECT_EQ(result.attention_mask[0][9 + 7].item<int64_t>(), 0);  // row 0 ended at its 7th new token
}

INSTANTIATE_TEST_SUITE_P(Llama, GenerateParity, ::testing::Values("plain", "gqa_tied_llama3", "bias_linear"));

}  // namespace
}  // namespace ferry
