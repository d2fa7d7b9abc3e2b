// The Llama-family model against transformers: tiny random models written by model_llama_ref.py
// (CausalLM: plain; GQA + tied embeddings + llama3 RoPE + head_dim != hidden/heads;
// q/k/v/o + MLP biases + linear RoPE) and model_families_ref.py (Qwen3ForCausalLM with q/k norms
// and head_dim != hidden/heads, with and without biases; a SmolLM2-shaped tied CausalLM;
// MistralForCausalLM with sliding_window null, 4096 and 5), loaded with causal_lm_from_pretrained,
// on left-padded input, in fp32, bf16 and fp16 (each against transformers in the same dtype). The
// families' models, saved again by Ferry's save_pretrained, load in transformers as the same model.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "src/io/hf_config.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "src/model/rotary_embedding.h"

namespace ferry {
namespace {

// `model`: <fixture stem>/<model>, e.g. "model_llama/plain" or "model_families/qwen3".
std::filesystem::path fixture(const std::string& model) {
  const auto folder = std::filesystem::path(FERRY_FIXTURES_DIR) / model;
  if (!std::filesystem::exists(folder / "logits.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixtures` first";
  }
  return folder;
}

// Largest |a - b| over the positions where mask (B, T) is 1; a, b: (B, T, V).
double max_error_on_tokens(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  const torch::Tensor keep = mask.to(torch::kBool).unsqueeze(-1);
  return ((a.to(torch::kFloat) - b.to(torch::kFloat)).abs() * keep).max().item<double>();
}

// "model_families/qwen3" -> "qwen3": the test's name.
std::string model_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.find('/') + 1);
  for (char& c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
  }
  return name;
}

class ModelParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelParity, RopeFrequenciesMatch) {
  const auto folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "logits.safetensors");
  const ModelShape config = io::read_hf_config(folder / "model" / "config.json");
  const torch::Tensor got = rope_inverse_frequencies(config);
  ASSERT_EQ(got.sizes(), expected.at("inv_freq").sizes());
  EXPECT_TRUE(torch::allclose(got, expected.at("inv_freq"), 1e-6, 0.0)) << got << expected.at("inv_freq");
  if (expected.count("long_inv_freq")) {  // LongRoPE (Phi-3): the long factors and the cos/sin scale
    const torch::Tensor long_freq =
        rope_inverse_frequencies(config.rotary_dim(), config.rope_theta, config.rope_scaling, /*long_context=*/true);
    EXPECT_TRUE(torch::allclose(long_freq, expected.at("long_inv_freq"), 1e-6, 0.0)) << long_freq << expected.at("long_inv_freq");
    EXPECT_NEAR(config.rope_attention_scaling(), expected.at("attention_scaling").item<double>(), 1e-6);
  }
  if (expected.count("rope_scaling_full_attention")) {  // the full layers' cos/sin factor (YaRN's attention factor)
    EXPECT_NEAR(config.rope_attention_scaling(), expected.at("rope_scaling_full_attention").item<double>(), 1e-6);
  }
  if (expected.count("inv_freq_sliding_attention")) {  // Gemma 3, OLMo 3: the sliding layers' own RoPE
    const double theta = config.sliding_rope_theta > 0 ? config.sliding_rope_theta : config.rope_theta;
    const RopeScaling scaling = config.sliding_rope_theta > 0 ? RopeScaling{} : config.rope_scaling;
    const torch::Tensor sliding = rope_inverse_frequencies(config.rotary_dim(), theta, scaling);
    EXPECT_TRUE(torch::allclose(sliding, expected.at("inv_freq_sliding_attention"), 1e-6, 0.0))
        << sliding << expected.at("inv_freq_sliding_attention");
  }
}

TEST_P(ModelParity, Fp32LogitsMatchTransformers) {
  torch::NoGradGuard no_grad;
  const auto folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "logits.safetensors");
  CausalLM model = causal_lm_from_pretrained(folder / "model");
  const torch::Tensor& mask = expected.at("attention_mask");
  const torch::Tensor logits = model(expected.at("input_ids"), mask);
  ASSERT_EQ(logits.sizes(), expected.at("logits").sizes());
  const double error = max_error_on_tokens(logits, expected.at("logits"), mask);
  EXPECT_LE(error, 1e-4) << "max |ferry - transformers| over non-pad positions";
  std::cout << GetParam() << ": fp32 max error " << error << "\n";
  EXPECT_FALSE(logits.isnan().any().item<bool>());
}

// bf16 keeps 8 bits of mantissa and the two implementations round in different places (fused
// SDPA kernels, order of additions), so agreement is judged relative to the logit scale: within
// 2% of max |logit| (one or two bf16 ulps of the largest logits), where fp32 gets 1e-4 absolute.
TEST_P(ModelParity, Bf16LogitsMatchTransformersBf16) {
  torch::NoGradGuard no_grad;
  const auto folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "logits.safetensors");
  CausalLM model = causal_lm_from_pretrained(folder / "model", torch::kBFloat16);
  const torch::Tensor& mask = expected.at("attention_mask");
  const torch::Tensor logits = model(expected.at("input_ids"), mask);
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  const double scale = expected.at("logits").abs().max().item<double>();
  const double error = max_error_on_tokens(logits, expected.at("logits_bf16"), mask);
  EXPECT_LE(error, 0.02 * scale) << "max |ferry bf16 - transformers bf16|, logit scale " << scale;
  RecordProperty("bf16_max_error_relative", std::to_string(error / scale));
  std::cout << GetParam() << ": bf16 max error " << error << " (" << error / scale << " of the logit scale)\n";
}

// fp16 (11 bits of mantissa; bf16: 8), against transformers run in fp16 on the CPU on the same
// weights: within 0.5% of max |logit|, room for the two implementations to round in different
// places (other kernels, other torch builds); measured on the CPU with torch 2.11: 0, the same ops
// in the same order. Also against the fp32 reference, within 1% (measured <= 0.4%), so that a
// shared fp16 mistake (overflow, a wrong cast) cannot pass unnoticed.
TEST_P(ModelParity, Fp16LogitsMatchTransformersFp16) {
  torch::NoGradGuard no_grad;
  const auto folder = fixture(GetParam());
  const io::TensorMap expected = io::load_safetensors(folder / "logits.safetensors");
  ASSERT_TRUE(expected.count("logits_fp16")) << "fixture predates fp16: rerun `ctest -R parity_fixture_model_llama`";
  CausalLM model = causal_lm_from_pretrained(folder / "model", torch::kHalf);
  const torch::Tensor& mask = expected.at("attention_mask");
  const torch::Tensor logits = model(expected.at("input_ids"), mask);
  EXPECT_EQ(logits.scalar_type(), torch::kHalf);
  EXPECT_FALSE(logits.isnan().any().item<bool>());
  const double scale = expected.at("logits").abs().max().item<double>();
  const double error = max_error_on_tokens(logits, expected.at("logits_fp16"), mask);
  const double error_fp32 = max_error_on_tokens(logits, expected.at("logits"), mask);
  EXPECT_LE(error, 0.005 * scale) << "max |ferry fp16 - transformers fp16|, logit scale " << scale;
  EXPECT_LE(error_fp32, 0.01 * scale) << "max |ferry fp16 - transformers fp32|, logit scale " << scale;
  RecordProperty("fp16_max_error_relative", std::to_string(error / scale));
  std::cout << GetParam() << ": fp16 max error " << error << " (" << error / scale << " of the logit scale; vs fp32 "
            << error_fp32 / scale << ")\n";
}

INSTANTIATE_TEST_SUITE_P(Llama, ModelParity,
                         ::testing::Values("model_llama/plain", "model_llama/gqa_tied_llama3",
                                           "model_llama/bias_linear"),
                         model_name);
INSTANTIATE_TEST_SUITE_P(Families, ModelParity,
                         ::testing::Values("model_families/gemma2", "model_families/gemma3",
                                           "model_families/smollm3", "model_families/olmo2", "model_families/olmo3",
                                           "model_families/olmo3_yarn",
                                           "model_families/phi3", "model_families/phi3_longrope",
                                           "model_families/phi3_long_context",
                                           "model_families/qwen3", "model_families/qwen3_bias",
                                           "model_families/smollm2", "model_families/mistral",
                                           "model_families/mistral_window_big", "model_families/mistral_window_5"),
                         model_name);

INSTANTIATE_TEST_SUITE_P(Experts, ModelParity,
                         ::testing::Values("model_moe/qwen3_moe", "model_moe/qwen2_moe", "model_moe/mixtral",
                                           "model_moe/olmoe"),
                         model_name);

// Ferry's save_pretrained of a model it loaded writes a folder transformers loads as the same model:
// io_safetensors_check.py compares config, every weight (bit for bit) and the logits with the
// transformers-saved original (so q_norm / k_norm and sliding_window survive the round trip).
class SaveParity : public ::testing::TestWithParam<std::string> {};

TEST_P(SaveParity, SavePretrainedLoadsInTransformersAsTheSameModel) {
  const auto original = fixture(GetParam()) / "model";
  const auto copy = std::filesystem::temp_directory_path() /
                    ("ferry_model_save_" + std::to_string(::getpid()) + "_" + model_name({GetParam(), 0}));
  std::filesystem::remove_all(copy);
  save_pretrained(*causal_lm_from_pretrained(original), io::read_hf_config(original / "config.json"), copy);
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/io_safetensors_check.py' model '" + original.string() + "' '" +
                              copy.string() + "' --shards 1 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  EXPECT_EQ(pclose(pipe), 0) << output;
  if (!HasFailure()) std::filesystem::remove_all(copy);
}

INSTANTIATE_TEST_SUITE_P(Families, SaveParity,
                         ::testing::Values("model_families/gemma2", "model_families/gemma3",
                                           "model_families/smollm3", "model_families/olmo2", "model_families/olmo3",
                                           "model_families/olmo3_yarn",
                                           "model_families/phi3", "model_families/phi3_longrope",
                                           "model_families/phi3_long_context",
                                           "model_families/qwen3", "model_families/qwen3_bias",
                                           "model_families/smollm2", "model_families/mistral",
                                           "model_families/mistral_window_5"),
                         model_name);

// The score model against LlamaForSequenceClassification (num_labels 1), the layout of reward
// models: per-token values, and the value at each row's last token (right and left padding).
TEST(ScoreModelParity, ValuesAndLastTokenScoresMatchTransformers) {
  torch::NoGradGuard no_grad;
  const auto folder = std::filesystem::path(FERRY_FIXTURES_DIR) / "model_llama" / "score";
  ASSERT_TRUE(std::filesystem::exists(folder / "score.safetensors")) << "run the parity fixtures first";
  const io::TensorMap expected = io::load_safetensors(folder / "score.safetensors");
  ScoreModel model = score_model_from_pretrained(folder / "model");
  const torch::Tensor& mask = expected.at("attention_mask");
  const torch::Tensor values = model(expected.at("input_ids"), mask);  // (B, T)
  EXPECT_LE(((values - expected.at("values")).abs() * mask).max().item<double>(), 1e-4);
  EXPECT_LE((last_token_values(values, mask) - expected.at("scores")).abs().max().item<double>(), 1e-4);
}

// A causal LM folder can start a score model (reward model from an SFT model): lm_head is dropped
// and score.weight initialised; without from_causal_lm the mismatch is an error naming both.
TEST(ScoreModelParity, StartsFromACausalLmFolder) {
  const auto folder = fixture("model_llama/plain") / "model";
  try {
    score_model_from_pretrained(folder);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("score.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos) << e.what();
  }
  ScoreModel model = score_model_from_pretrained(folder, torch::kFloat, torch::kCPU, /*from_causal_lm=*/true, 1);
  EXPECT_GT(model->score->weight.abs().sum().item<double>(), 0.0);
  CausalLM lm = causal_lm_from_pretrained(folder);
  EXPECT_TRUE(torch::equal(model->model->norm->weight, lm->model->norm->weight));
}

INSTANTIATE_TEST_SUITE_P(Experts, SaveParity,
                         ::testing::Values("model_moe/qwen3_moe", "model_moe/qwen2_moe", "model_moe/mixtral",
                                           "model_moe/olmoe"),
                         model_name);

}  // namespace
}  // namespace ferry
