// Ferry's checkpoint I/O against the Python ecosystem, both ways:
//   - reads files written by `safetensors.torch.save_file` and by transformers' save_pretrained
//     (sharded), and config.json files as transformers reads them (fixtures: io_safetensors_ref.py);
//   - writes files that `safetensors.torch.load_file` and transformers' from_pretrained must load
//     to the same values (checked by io_safetensors_check.py, which fails on any difference).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/safetensors.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(FERRY_FIXTURES_DIR) / "io_safetensors";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing fixture " + path.string() + " (run the parity_fixtures test first)");
  return json::parse(in);
}

// Exact element-wise comparison with reference values stored as float64 (exact for every dtype used).
void expect_values(const at::Tensor& got, const json& expected, const std::string& name) {
  const at::Tensor flat = got.to(at::kDouble).contiguous().flatten();
  ASSERT_EQ(flat.numel(), static_cast<int64_t>(expected.size())) << name;
  const double* data = flat.data_ptr<double>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    ASSERT_EQ(data[i], expected[i].get<double>()) << name << " element " << i;
  }
}

int run_checker(const std::string& args) {
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/io_safetensors_check.py' " + args;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class IoParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ferry_io_parity_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) return;  // keep the files to inspect a failure
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(IoParityTest, ReadsEveryDtypeWrittenByPython) {
  const json expected = read_json(kFixtures / "dtypes.json");
  const SafetensorsFile file(kFixtures / "dtypes.safetensors");
  EXPECT_EQ(file.metadata().at("source"), "python");
  ASSERT_EQ(file.names().size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const TensorInfo& info = file.info(name);
    EXPECT_EQ(safetensors_dtype_name(info.dtype), want["dtype"].get<std::string>());
    EXPECT_EQ(info.shape, want["shape"].get<std::vector<int64_t>>());
    expect_values(file.load(name), want["values"], name + " (load)");
    expect_values(file.tensor(name), want["values"], name + " (view)");
  }
}

TEST_F(IoParityTest, ReadsShardedCheckpointWrittenByTransformers) {
  const json expected = read_json(kFixtures / "llama_sharded.json");
  const fs::path model = kFixtures / "llama_sharded";
  const HfWeights weights(model);
  EXPECT_EQ(weights.files().size(), expected["shards"].size());
  const TensorMap loaded = load_hf_weights(model);
  // transformers' state_dict may list the tied lm_head; the file need not hold it.
  for (const auto& [name, want] : expected["weights"].items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(loaded.count(name)) << "missing " << name;
    EXPECT_EQ(loaded.at(name).sizes().vec(), want["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(loaded.at(name).scalar_type(), at::kFloat);
    expect_values(loaded.at(name), want["values"], name);
  }
  EXPECT_EQ(loaded.size(), expected["weights"].size());

  const ModelShape config = read_hf_config(model / "config.json");
  const json& c = expected["config"];
  EXPECT_EQ(config.vocab_size, c["vocab_size"].get<int64_t>());
  EXPECT_EQ(config.hidden_size, c["hidden_size"].get<int64_t>());
  EXPECT_EQ(config.num_key_value_heads, c["num_key_value_heads"].get<int64_t>());
  EXPECT_EQ(config.head_dim, c["head_dim"].get<int64_t>());
  EXPECT_EQ(config.rope_theta, c["rope_theta"].get<double>());
  EXPECT_EQ(config.rope_scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(config.rope_scaling.factor, c["factor"].get<double>());
  EXPECT_EQ(config.rope_scaling.original_max_position_embeddings, c["original_max_position_embeddings"].get<int64_t>());
  EXPECT_EQ(config.eos_token_ids, c["eos_token_id"].get<std::vector<int64_t>>());
}

TEST_F(IoParityTest, ReadsConfigsAsTransformersDoes) {
  const json expected = read_json(kFixtures / "configs.json");
  ASSERT_GE(expected.size(), 4u);
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const ModelShape c = read_hf_config(kFixtures / "configs" / name / "config.json");
    EXPECT_EQ(c.model_type, want["model_type"].get<std::string>());
    EXPECT_EQ(c.vocab_size, want["vocab_size"].get<int64_t>());
    EXPECT_EQ(c.hidden_size, want["hidden_size"].get<int64_t>());
    EXPECT_EQ(c.intermediate_size, want["intermediate_size"].get<int64_t>());
    EXPECT_EQ(c.num_hidden_layers, want["num_hidden_layers"].get<int64_t>());
    EXPECT_EQ(c.num_attention_heads, want["num_attention_heads"].get<int64_t>());
    EXPECT_EQ(c.num_key_value_heads, want["num_key_value_heads"].get<int64_t>());
    EXPECT_EQ(c.head_dim, want["head_dim"].get<int64_t>());
    EXPECT_EQ(c.max_position_embeddings, want["max_position_embeddings"].get<int64_t>());
    EXPECT_EQ(c.rms_norm_eps, want["rms_norm_eps"].get<double>());
    EXPECT_EQ(c.rope_theta, want["rope_theta"].get<double>());
    const std::string rope_type = want["rope_type"];
    const RopeScalingType type = rope_type == "linear"   ? RopeScalingType::linear
                                 : rope_type == "llama3" ? RopeScalingType::llama3
                                                         : RopeScalingType::none;
    ASSERT_EQ(rope_type == "default" || type != RopeScalingType::none, true) << rope_type;
    EXPECT_EQ(c.rope_scaling.type, type);
    EXPECT_EQ(c.rope_scaling.factor, want["factor"].get<double>());
    if (type == RopeScalingType::llama3) {
      EXPECT_EQ(c.rope_scaling.low_freq_factor, want["low_freq_factor"].get<double>());
      EXPECT_EQ(c.rope_scaling.high_freq_factor, want["high_freq_factor"].get<double>());
      EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, want["original_max_position_embeddings"].get<int64_t>());
    }
    EXPECT_EQ(c.tie_word_embeddings, want["tie_word_embeddings"].get<bool>());
    EXPECT_EQ(c.attention_bias, want["attention_bias"].get<bool>());
    EXPECT_EQ(c.attention_output_bias, want["attention_output_bias"].get<bool>());
    EXPECT_EQ(c.mlp_bias, want["mlp_bias"].get<bool>());
    EXPECT_EQ(c.qk_norm != QkNorm::none, want["qk_norm"].get<bool>());
    EXPECT_EQ(c.sliding_window, want["sliding_window"].get<int64_t>());
    EXPECT_EQ(c.bos_token_id, want["bos_token_id"].get<int64_t>());
    EXPECT_EQ(c.eos_token_ids, want["eos_token_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(c.pad_token_id, want["pad_token_id"].get<int64_t>());
    EXPECT_EQ(c.torch_dtype, want["dtype"].get<std::string>());
  }
}

TEST_F(IoParityTest, PythonReadsWhatFerryWrites) {
  const SafetensorsFile original(kFixtures / "dtypes.safetensors");
  save_safetensors(dir_ / "copy.safetensors", original.load_all(), original.metadata());
  EXPECT_EQ(run_checker("file '" + (kFixtures / "dtypes.safetensors").string() + "' '" + (dir_ / "copy.safetensors").string() + "'"),
            0);
}

TEST_F(IoParityTest, TransformersLoadsFerryWeightsSingleAndSharded) {
  const fs::path original = kFixtures / "llama_sharded";
  const TensorMap weights = load_hf_weights(original);
  const ModelShape config = read_hf_config(original / "config.json");

  write_hf_config(dir_ / "single" / "config.json", config);
  save_hf_weights(dir_ / "single", weights);
  EXPECT_EQ(run_checker("model '" + original.string() + "' '" + (dir_ / "single").string() + "' --shards 1"), 0);

  uint64_t total = 0;
  for (const auto& [name, t] : weights) total += t.numel() * t.element_size();
  write_hf_config(dir_ / "sharded" / "config.json", config);
  save_hf_weights(dir_ / "sharded", weights, total / 3);
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "sharded")) {
    shards += entry.path().extension() == ".safetensors";
  }
  EXPECT_GE(shards, 3);
  EXPECT_EQ(run_checker("model '" + original.string() + "' '" + (dir_ / "sharded").string() + "' --shards " +
                        std::to_string(shards)),
            0);
}

// Configs written by Ferry, and what transformers must read from them (literal expectations).
TEST_F(IoParityTest, TransformersReadsFerryConfigs) {
  struct Case {
    std::string name;
    ModelShape config;
    json expected;
  };
  std::vector<Case> cases;

  ModelShape gqa;
  gqa.vocab_size = 64, gqa.hidden_size = 32, gqa.intermediate_size = 48, gqa.num_hidden_layers = 1;
  gqa.num_attention_heads = 4, gqa.num_key_value_heads = 2, gqa.head_dim = 16, gqa.max_position_embeddings = 128;
  gqa.rms_norm_eps = 1e-5, gqa.rope_theta = 500000.0, gqa.tie_word_embeddings = true;
  gqa.bos_token_id = 0, gqa.eos_token_ids = {1, 2}, gqa.pad_token_id = 3, gqa.torch_dtype = "bfloat16";
  cases.push_back({"gqa_tied", gqa,
                   {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 64},
                    {"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
                    {"num_key_value_heads", 2}, {"head_dim", 16}, {"max_position_embeddings", 128},
                    {"rms_norm_eps", 1e-5}, {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}}},
                    {"tie_word_embeddings", true}, {"attention_bias", false}, {"mlp_bias", false},
                    {"bos_token_id", 0}, {"eos_token_id", {1, 2}}, {"pad_token_id", 3}, {"dtype", "bfloat16"},
                    {"biases", {{"q", false}, {"o", false}, {"mlp", false}}}}});

  ModelShape llama3 = gqa;
  llama3.tie_word_embeddings = false, llama3.max_position_embeddings = 1024;
  llama3.rope_scaling = {RopeScalingType::llama3, 8.0, 1.0, 4.0, 256};
  llama3.eos_token_ids = {2}, llama3.pad_token_id = -1, llama3.attention_bias = llama3.attention_output_bias = true;
  llama3.mlp_bias = true;
  cases.push_back({"llama3_bias", llama3,
                   {{"rope_parameters",
                     {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 256}}},
                    {"eos_token_id", 2}, {"pad_token_id", nullptr}, {"tie_word_embeddings", false},
                    {"attention_bias", true}, {"mlp_bias", true}, {"head_dim", 16},
                    {"biases", {{"q", true}, {"o", true}, {"mlp", true}}}}});

  ModelShape linear;  // defaults apart from the shape: a 7B-like config, not instantiated
  linear.rope_scaling.type = RopeScalingType::linear, linear.rope_scaling.factor = 4.0;
  linear.bos_token_id = -1, linear.eos_token_ids = {};
  cases.push_back({"linear_7b", linear,
                   {{"num_hidden_layers", 32}, {"num_key_value_heads", 32}, {"head_dim", 128},
                    {"rope_parameters", {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 4.0}}},
                    {"bos_token_id", nullptr}, {"eos_token_id", nullptr}, {"dtype", "float32"}}});

  ModelShape qwen2 = gqa;
  qwen2.model_type = "qwen2", qwen2.attention_bias = true, qwen2.attention_output_bias = false;
  qwen2.tie_word_embeddings = false, qwen2.eos_token_ids = {5};
  cases.push_back({"qwen2", qwen2,
                   {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"num_key_value_heads", 2},
                    {"eos_token_id", 5}, {"head_dim", 16}, {"biases", {{"q", true}, {"o", false}, {"mlp", false}}}}});

  ModelShape qwen3 = gqa;  // head_dim 16 with hidden 32 / 4 heads: explicit, and not hidden / heads
  qwen3.model_type = "qwen3", qwen3.qk_norm = QkNorm::per_head, qwen3.bos_token_id = -1, qwen3.eos_token_ids = {2};
  cases.push_back({"qwen3", qwen3,
                   {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"head_dim", 16},
                    {"attention_bias", false}, {"sliding_window", nullptr}, {"tie_word_embeddings", true},
                    {"bos_token_id", nullptr}, {"eos_token_id", 2},
                    {"biases", {{"q", false}, {"o", false}, {"mlp", false}}}, {"qk_norm", true}}});
  ModelShape qwen3_bias = qwen3;
  qwen3_bias.attention_bias = qwen3_bias.attention_output_bias = true, qwen3_bias.tie_word_embeddings = false;
  cases.push_back({"qwen3_bias", qwen3_bias,
                   {{"architectures", {"Qwen3ForCausalLM"}}, {"attention_bias", true}, {"tie_word_embeddings", false},
                    {"head_dim", 16}, {"biases", {{"q", true}, {"o", true}, {"mlp", false}}}, {"qk_norm", true}}});

  ModelShape mistral = gqa;
  mistral.model_type = "mistral", mistral.sliding_window = 4096, mistral.tie_word_embeddings = false;
  cases.push_back({"mistral_window", mistral,
                   {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"sliding_window", 4096},
                    {"head_dim", 16}, {"biases", {{"q", false}, {"o", false}, {"mlp", false}}}, {"qk_norm", false}}});
  mistral.sliding_window = 0;
  cases.push_back({"mistral_full", mistral, {{"architectures", {"MistralForCausalLM"}}, {"sliding_window", nullptr}}});

  for (const auto& c : cases) {
    write_hf_config(dir_ / c.name / "config.json", c.config);
    std::ofstream(dir_ / c.name / "expected.json") << c.expected.dump(2);
  }
  EXPECT_EQ(run_checker("configs '" + dir_.string() + "'"), 0);
}

}  // namespace
}  // namespace ferry::io
