// Reward models in Hugging Face's sequence-classification layout, checked with transformers:
// a ScoreModel saved by Ferry (llama, qwen2, qwen3, mistral) loads with AutoModelForSequenceClassification
// and scores a padded batch as Ferry does (model_score_check.py, <= 1e-4); `ferry export` (the
// library call behind it) writes a reward-model folder back out as a sequence classifier, whether
// the input says so in config.json or only through score.weight; a transformers-saved
// LlamaForSequenceClassification (the model_llama fixture) loads in score_model_from_pretrained
// and, exported, still loads in transformers with the same scores.
#include <gtest/gtest.h>
#include <unistd.h>

#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_export.h"
#include "src/io/safetensors.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

struct CheckResult {
  int exit_code;
  std::string output;
};

// model_score_check.py: transformers loads `folder` as `architecture` and gives `expected`'s scores.
CheckResult transformers_check(const fs::path& folder, const fs::path& expected, const std::string& architecture) {
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/model_score_check.py' '" + folder.string() + "' '" + expected.string() +
                              "' " + architecture + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

ModelShape tiny_config(const std::string& model_type) {
  ModelShape config = test_support::tiny_llama_config(
      {.vocab_size = 96, .hidden_size = 32, .intermediate_size = 64, .head_dim = 8, .max_position_embeddings = 64});
  config.model_type = model_type;
  config.bos_token_id = 1;
  config.eos_token_ids = {2};
  config.pad_token_id = 0;
  if (model_type == "qwen2") {
    config.attention_bias = true;  // q/k/v only
    config.attention_output_bias = false;
  }
  if (model_type == "qwen3") config.qk_norm = QkNorm::per_head;
  if (model_type == "mistral") config.sliding_window = 4;  // shorter than the 8-token rows

  return config;
}

// A random score model with non-zero biases (when it has any), norm weights other than 1 (q/k
// norms included) and a non-trivial score head.
ScoreModel random_score_model(const ModelShape& config, uint64_t seed) {
  ScoreModel model(config);
  init_model_weights(*model, config, 0.2, seed);
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& item : model->named_parameters()) {
    if (item.key().ends_with(".bias")) item.value().normal_(0.0, 0.2);
    if (item.key().ends_with("norm.weight")) item.value().uniform_(0.5, 1.5);
  }
  model->eval();
  return model;
}

// Three rows of 8: right-padded, left-padded, full; pad id 0 only at padding.
std::pair<torch::Tensor, torch::Tensor> padded_batch(int64_t vocab) {
  torch::manual_seed(5);
  torch::Tensor ids = torch::randint(3, vocab, {3, 8}, torch::kLong);
  torch::Tensor mask = torch::ones({3, 8}, torch::kLong);
  ids.index_put_({0, torch::indexing::Slice(5)}, 0);
  mask.index_put_({0, torch::indexing::Slice(5)}, 0);
  ids.index_put_({1, torch::indexing::Slice(0, 3)}, 0);
  mask.index_put_({1, torch::indexing::Slice(0, 3)}, 0);
  return {ids, mask};
}

// Ferry's scores (the value at each row's last token) and the inputs, for the Python check.
fs::path write_expected(ScoreModelImpl& model, const fs::path& file) {
  torch::NoGradGuard no_grad;
  const auto [ids, mask] = padded_batch(model.config().vocab_size);
  const torch::Tensor scores = last_token_values(model.forward(ids, mask), mask).to(torch::kFloat);
  io::save_safetensors(file, {{"input_ids", ids}, {"attention_mask", mask}, {"scores", scores}});
  return file;
}

class ScoreExport : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ferry_score_export_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(root_);  // keep the files to inspect a failure
  }
  fs::path root_;
};

TEST_F(ScoreExport, FerryLlamaScoreModelLoadsInTransformersWithTheSameScores) {
  const ModelShape config = tiny_config("llama");
  ScoreModel model = random_score_model(config, 11);
  save_pretrained(*model, config, root_ / "rm");
  const nlohmann::json written = read_json(root_ / "rm" / "config.json");
  EXPECT_EQ(written["architectures"], nlohmann::json({"LlamaForSequenceClassification"}));
  EXPECT_EQ(io::read_hf_head(root_ / "rm" / "config.json"), io::HfHead::score);

  const fs::path expected = write_expected(*model, root_ / "expected.safetensors");
  const CheckResult check = transformers_check(root_ / "rm", expected, "LlamaForSequenceClassification");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  std::cout << check.output;

  // And back into Ferry: the same scores.
  ScoreModel loaded = score_model_from_pretrained(root_ / "rm");
  const io::TensorMap inputs = io::load_safetensors(expected);
  torch::NoGradGuard no_grad;
  const torch::Tensor again = last_token_values(loaded(inputs.at("input_ids"), inputs.at("attention_mask")),
                                                inputs.at("attention_mask"));
  EXPECT_TRUE(torch::allclose(again, inputs.at("scores"), 0.0, 1e-6));
}

TEST_F(ScoreExport, FerryQwen2ScoreModelLoadsInTransformersWithTheSameScores) {
  const ModelShape config = tiny_config("qwen2");
  ScoreModel model = random_score_model(config, 12);
  save_pretrained(*model, config, root_ / "rm");
  const fs::path expected = write_expected(*model, root_ / "expected.safetensors");
  const CheckResult check = transformers_check(root_ / "rm", expected, "Qwen2ForSequenceClassification");
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// Qwen3 (q/k norms) and Mistral (a sliding window shorter than the rows) score models.
TEST_F(ScoreExport, FerryQwen3AndMistralScoreModelsLoadInTransformersWithTheSameScores) {
  for (const auto& [model_type, architecture] :
       {std::pair<std::string, std::string>{"qwen3", "Qwen3ForSequenceClassification"},
        std::pair<std::string, std::string>{"mistral", "MistralForSequenceClassification"}}) {
    SCOPED_TRACE(model_type);
    const ModelShape config = tiny_config(model_type);
    ScoreModel model = random_score_model(config, 13);
    save_pretrained(*model, config, root_ / model_type);
    const fs::path expected = write_expected(*model, root_ / (model_type + ".safetensors"));
    const CheckResult check = transformers_check(root_ / model_type, expected, architecture);
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }
}

// A reward-model checkpoint whose config.json says CausalLM (as Ferry wrote before) is
// recognised by its score.weight; `ferry export` writes it as a sequence classifier.
TEST_F(ScoreExport, ExportRecognisesScoreWeightAndWritesASequenceClassifier) {
  const ModelShape config = tiny_config("llama");
  ScoreModel model = random_score_model(config, 13);
  fs::create_directories(root_ / "ckpt");
  io::save_hf_weights(root_ / "ckpt", state_of(*model));
  io::write_hf_config(root_ / "ckpt" / "config.json", config, io::HfHead::causal_lm);
  ASSERT_EQ(io::read_hf_head(root_ / "ckpt" / "config.json"), io::HfHead::causal_lm);

  io::HfExportOptions options;
  options.checkpoint = root_ / "ckpt";
  options.output = root_ / "out";
  const io::HfExportSummary summary = io::export_hf_model(options);
  EXPECT_TRUE(summary.score_model);
  EXPECT_EQ(io::read_hf_head(root_ / "out" / "config.json"), io::HfHead::score);
  const fs::path expected = write_expected(*model, root_ / "expected.safetensors");
  const CheckResult check = transformers_check(root_ / "out", expected, "LlamaForSequenceClassification");
  EXPECT_EQ(check.exit_code, 0) << check.output;

  // A causal LM stays one.
  CausalLM lm(config);
  io::save_hf_weights(root_ / "lm", state_of(*lm));
  io::write_hf_config(root_ / "lm" / "config.json", config);
  options.checkpoint = root_ / "lm";
  options.output = root_ / "lm_out";
  EXPECT_FALSE(io::export_hf_model(options).score_model);
  EXPECT_EQ(read_json(root_ / "lm_out" / "config.json")["architectures"], nlohmann::json({"LlamaForCausalLM"}));
}

// transformers' own LlamaForSequenceClassification (model_llama_ref.py) loads in Ferry with its
// scores, and exported by Ferry it is still a sequence classifier with the same scores.
TEST_F(ScoreExport, TransformersSavedRewardModelLoadsAndExports) {
  const fs::path fixture = fs::path(FERRY_FIXTURES_DIR) / "model_llama/score";
  ASSERT_TRUE(fs::exists(fixture / "score.safetensors")) << "run the parity fixtures first";
  const io::TensorMap expected = io::load_safetensors(fixture / "score.safetensors");
  {
    torch::NoGradGuard no_grad;
    ScoreModel model = score_model_from_pretrained(fixture / "model");
    const torch::Tensor& mask = expected.at("attention_mask");
    const torch::Tensor scores = last_token_values(model(expected.at("input_ids"), mask), mask);
    EXPECT_LE((scores - expected.at("scores")).abs().max().item<double>(), 1e-4);
  }
  io::HfExportOptions options;
  options.checkpoint = fixture / "model";
  options.output = root_ / "out";
  EXPECT_TRUE(io::export_hf_model(options).score_model);
  const CheckResult check = transformers_check(root_ / "out", fixture / "score.safetensors", "LlamaForSequenceClassification");
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace ferry
