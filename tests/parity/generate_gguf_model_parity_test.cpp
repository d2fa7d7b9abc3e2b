// GGUF models against transformers' from_pretrained(..., gguf_file=...): tiny llama / qwen2 /
// qwen3 models written by gguf-py with several tensor types (io_gguf_model_ref.py), loaded through
// the folder Ferry prepares for a .gguf file. Logits (fp32) within 1e-4 of transformers', greedy
// tokens equal, and the tokenizer rebuilt from the GGUF metadata gives the ids of transformers'
// GGUF tokenizer on the parity strings, or, where that departs from the tokenizer the vocabulary
// came from, the source's.
// Designated initializers below name only the options a test sets; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "src/generate/generate.h"
#include "src/io/model_path.h"
#include "src/io/safetensors.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(FERRY_FIXTURES_DIR) / "io_gguf_model" / name; }

fs::path prepared(const std::string& name) {
  static const fs::path cache = test_support::process_scratch_dir("io_gguf_model_parity");
  return io::prepare_gguf_model_folder(fixture(name) / "model.gguf", cache);
}

class GgufModelParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufModelParity, LogitsAndGreedyTokensMatchTransformers) {
  const io::TensorMap expected = io::load_safetensors(fixture(GetParam()) / "reference.safetensors");
  CausalLM model = causal_lm_from_pretrained(prepared(GetParam()));
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(expected.at("input_ids"));
  const torch::Tensor& reference = expected.at("logits");
  ASSERT_EQ(logits.sizes(), reference.sizes());
  const double scale = reference.abs().max().item<double>();
  EXPECT_LE((logits - reference).abs().max().item<double>(), 1e-4 * std::max(1.0, scale)) << "logit scale " << scale;

  const torch::Tensor prompt = expected.at("prompt_ids");
  const GenerateResult result = generate(*model, prompt, torch::ones_like(prompt), {.max_new_tokens = 12, .pad_token_id = 0});
  const torch::Tensor tokens = result.tokens.slice(1, prompt.size(1));
  EXPECT_TRUE(torch::equal(tokens, expected.at("greedy"))) << "ferry\n" << tokens << "\ntransformers\n"
                                                           << expected.at("greedy");
}

// Where transformers' GGUF tokenizer departs from the tokenizer the vocabulary came from (run
// without its normalizer, which a GGUF does not carry), Ferry follows the source, as llama.cpp
// does: SmolLM2's single-digit split ("smollm"; transformers applies GPT-2's regex), a user-defined
// token outside the byte alphabet (transformers drops it) and transformers' own "<|endoftext|>",
// which the vocabulary lacks. (Under SentencePiece, text that starts with a space tokenizes as
// transformers 5 does, as for any SentencePiece folder; llama.cpp adds one more "▁" there.)
TEST_P(GgufModelParity, TokenizerMatchesTransformersOrTheSourceTokenizer) {
  const Tokenizer tokenizer(prepared(GetParam()).string());
  std::ifstream in(fixture(GetParam()) / "tokens.json");
  const nlohmann::json cases = nlohmann::json::parse(in);
  int mismatches = 0, as_source = 0;
  for (size_t i = 0; i < cases["texts"].size(); ++i) {
    const std::string text = cases["texts"][i];
    std::vector<int64_t> ids;
    for (const TokenSpan& span : tokenizer.encode_with_control_pieces_and_offsets(text)) ids.push_back(span.id);
    const std::vector<int64_t> transformers = cases["ids"][i], source = cases["source_ids"][i];
    if (ids == transformers) continue;
    if (ids == source) {
      ++as_source;
      continue;
    }
    if (++mismatches <= 5) {
      ADD_FAILURE() << "text " << i << " " << nlohmann::json(text).dump() << "\nferry        "
                    << nlohmann::json(ids).dump() << "\ntransformers " << nlohmann::json(transformers).dump()
                    << "\nsource       " << nlohmann::json(source).dump();
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases["texts"].size() << " strings";
  std::cout << GetParam() << ": " << cases["texts"].size() - as_source << " of " << cases["texts"].size()
            << " strings as transformers' GGUF tokenizer, " << as_source << " as the source tokenizer where it differs\n";
}

INSTANTIATE_TEST_SUITE_P(Models, GgufModelParity,
                         ::testing::Values("llama_spm", "qwen2_bpe", "qwen3_bpe", "smollm_bpe"));

// Llama 3.x rope scaling as llama.cpp stores it (per-frequency factors in rope_freqs.weight),
// against the Hugging Face model the file was written from (transformers' GGUF loader ignores it).
TEST(GgufModelLlama3Rope, LogitsAndGreedyTokensMatchTheSourceModel) {
  const io::TensorMap expected = io::load_safetensors(fixture("llama3_rope") / "reference.safetensors");
  CausalLM model = causal_lm_from_pretrained(prepared("llama3_rope"));
  const RopeScaling& rope = model->config().rope_scaling;
  EXPECT_EQ(rope.type, RopeScalingType::llama3);
  EXPECT_DOUBLE_EQ(rope.factor, 8.0);
  EXPECT_NEAR(rope.high_freq_factor, 4.0, 1e-6);
  EXPECT_EQ(rope.original_max_position_embeddings, 8192);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(expected.at("input_ids"));
  const double scale = expected.at("logits").abs().max().item<double>();
  EXPECT_LE((logits - expected.at("logits")).abs().max().item<double>(), 1e-4 * std::max(1.0, scale));
  const torch::Tensor prompt = expected.at("prompt_ids");
  const GenerateResult result = generate(*model, prompt, torch::ones_like(prompt), {.max_new_tokens = 12, .pad_token_id = 0});
  EXPECT_TRUE(torch::equal(result.tokens.slice(1, prompt.size(1)), expected.at("greedy")));
}

TEST(GgufModelFolder, IsReusedUntilTheFileChanges) {
  const fs::path cache = test_support::process_scratch_dir("io_gguf_model_reuse");
  fs::create_directories(cache);
  const fs::path copy = cache / "copy.gguf";
  fs::copy_file(fixture("qwen2_bpe") / "model.gguf", copy, fs::copy_options::overwrite_existing);
  const fs::path first = io::prepare_gguf_model_folder(copy, cache);
  EXPECT_TRUE(fs::exists(first / "config.json"));
  EXPECT_TRUE(fs::exists(first / "tokenizer.json"));
  EXPECT_TRUE(fs::is_symlink(first / "model.gguf"));
  EXPECT_EQ(io::prepare_gguf_model_folder(copy, cache), first);
  fs::last_write_time(copy, fs::last_write_time(copy) + std::chrono::seconds(5));
  EXPECT_NE(io::prepare_gguf_model_folder(copy, cache), first);
}

}  // namespace
}  // namespace ferry
