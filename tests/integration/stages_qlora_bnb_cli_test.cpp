// A model folder stored in bitsandbytes' 4-bit form (config.json's quantization_config + packed
// uint8 weights with their quant-state tensors; here written by Ferry itself, whose NF4 checkpoints
// use the same tensors, so the test needs no Python: tests/parity/stages_qlora_bnb_folder_parity_test.cpp
// checks a folder bitsandbytes wrote) through the CLI:
//   - train-sft with lora.quantize_base nf4 uses the stored weights (a note says so) and with none
//     dequantises them (a note says that); generate and export read the folder;
//   - bad folders exit 2 with a message naming the folder or config.json and the tensor or key: a
//     missing quant-state tensor, a missing absmax, bnb_4bit_quant_type fp4, load_in_8bit.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/model/quantized_base.h"
#include "tests/integration/ferry_process.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using ferry_test::run_ferry;

const std::string kStateSuffix = ".quant_state.bitsandbytes__nf4";
const std::string kQ0 = "model.layers.0.self_attn.q_proj.weight";

// A one-layer demo-shaped model with its projections in NF4, saved into `dir` as a bnb 4-bit folder:
// the weights and what transformers writes into config.json, with `quantization` merged into its
// quantization_config; the demo tokenizer beside them.
void write_4bit_folder(const fs::path& dir, const nlohmann::json& quantization = nlohmann::json::object()) {
  ModelShape shape = io::read_hf_config(fs::path(FERRY_SOURCE_DIR) / "configs/demo-model.json");
  shape.num_hidden_layers = 1;
  CausalLM model(shape);
  init_model_weights(*model, shape, 0.02, 1);
  quantize_base_nf4(*model->model, /*double_quant=*/true);
  save_pretrained(*model, shape, dir);
  nlohmann::json config = nlohmann::json::parse(read_file(dir / "config.json"));
  config["quantization_config"] = {{"_load_in_4bit", true},         {"_load_in_8bit", false},
                                   {"bnb_4bit_compute_dtype", "float32"},
                                   {"bnb_4bit_quant_storage", "uint8"}, {"bnb_4bit_quant_type", "nf4"},
                                   {"bnb_4bit_use_double_quant", true}, {"llm_int8_skip_modules", nullptr},
                                   {"llm_int8_threshold", 6.0},     {"load_in_4bit", true},
                                   {"load_in_8bit", false},         {"quant_method", "bitsandbytes"}};
  config["quantization_config"].update(quantization);
  write_file_atomic(dir / "config.json", config.dump(2));
  fs::copy_file(fs::path(FERRY_SOURCE_DIR) / "data/tokenizer.model", dir / "tokenizer.model");
}

// The folder without the tensor `name`.
void drop_tensor(const fs::path& dir, const std::string& name) {
  io::TensorMap tensors = io::load_hf_weights(dir);
  ASSERT_EQ(tensors.erase(name), 1u) << name;
  io::save_hf_weights(dir, tensors);
}

std::string train_sft(const fs::path& model, const fs::path& out, const std::string& quantize_base, int* exit_code) {
  const std::string args = "train-sft --config configs/demo-sft-qlora.yaml --set model.path=" + model.string() +
                           " --set output.dir=" + out.string() + " --set lora.quantize_base=" + quantize_base +
                           " --set data.eval_file= --set data.prompt_file= --set data.max_samples=8"
                           " --set train.micro_batch_size=4 --set train.max_steps=1 --set train.eval_every=0"
                           " --set train.save_every=0" + ferry_test::kQuietCpu;
  const auto result = run_ferry(args);
  *exit_code = result.exit_code;
  return result.output;
}

class BnbFolderCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ferry_test::process_temp_dir("ferry_qlora_bnb_cli");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(BnbFolderCli, TrainsGeneratesAndExportsFromA4BitFolder) {
  const fs::path model = dir_ / "model";
  write_4bit_folder(model);
  int code = 0;
  std::string output = train_sft(model, dir_ / "nf4", "nf4", &code);
  ASSERT_EQ(code, 0) << output;
  EXPECT_CONTAINS(output, "stores 7 projections in 4 bits (NF4, double-quantised): used as stored");
  output = train_sft(model, dir_ / "none", "none", &code);
  ASSERT_EQ(code, 0) << output;
  EXPECT_CONTAINS(output, "lora.quantize_base is none, so they are dequantised into a float32 base");
  const auto generate = run_ferry("generate --model " + model.string() + " --prompt hi --greedy --max-new-tokens 3");
  EXPECT_EQ(generate.exit_code, 0) << generate.output;
  const auto exported = run_ferry("export --checkpoint " + model.string() + " --output " + (dir_ / "out").string());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string config = read_file(dir_ / "out" / "config.json");
  EXPECT_EQ(config.find("quantization_config"), std::string::npos) << "the export is full precision";
  EXPECT_EQ(io::load_hf_weights(dir_ / "out").at(kQ0).scalar_type(), torch::kFloat);
}

TEST_F(BnbFolderCli, AMissingQuantStateTensorNamesTheFolderAndTheTensor) {
  const fs::path model = dir_ / "model";
  write_4bit_folder(model);
  drop_tensor(model, kQ0 + kStateSuffix);
  int code = 0;
  for (const std::string quantize : {"nf4", "none"}) {
    const std::string output = train_sft(model, dir_ / quantize, quantize, &code);
    EXPECT_EQ(code, 2) << output;
    EXPECT_CONTAINS(output, "model folder " + model.string());
    EXPECT_CONTAINS(output, "lacks its tensor " + kQ0 + kStateSuffix);
  }
  const auto generate = run_ferry("generate --model " + model.string() + " --prompt hi --max-new-tokens 2");
  EXPECT_EQ(generate.exit_code, 2) << generate.output;
  EXPECT_CONTAINS(generate.output, kQ0 + kStateSuffix);
}

TEST_F(BnbFolderCli, AMissingAbsmaxNamesTheTensor) {
  const fs::path model = dir_ / "model";
  write_4bit_folder(model);
  drop_tensor(model, kQ0 + ".absmax");
  int code = 0;
  const std::string output = train_sft(model, dir_ / "nf4", "nf4", &code);
  EXPECT_EQ(code, 2) << output;
  EXPECT_CONTAINS(output, "lacks its tensor " + kQ0 + ".absmax");
}

TEST_F(BnbFolderCli, Fp4And8BitFoldersNameConfigJsonAndTheKey) {
  const fs::path fp4 = dir_ / "fp4", int8 = dir_ / "int8";
  write_4bit_folder(fp4, {{"bnb_4bit_quant_type", "fp4"}});
  write_4bit_folder(int8, {{"load_in_8bit", true}, {"load_in_4bit", false}, {"_load_in_4bit", false}});
  int code = 0;
  std::string output = train_sft(fp4, dir_ / "run", "nf4", &code);
  EXPECT_EQ(code, 2) << output;
  EXPECT_CONTAINS(output, (fp4 / "config.json").string() + ": 'quantization_config.bnb_4bit_quant_type' is 'fp4'");
  EXPECT_CONTAINS(output, "use the full-precision model instead");
  for (const std::string& command : {std::string("generate --prompt hi --model "), "export --output " + (dir_ / "x").string() +
                                                                          " --checkpoint "}) {
    const auto result = run_ferry(command + fp4.string());
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_CONTAINS(result.output, "'quantization_config.bnb_4bit_quant_type' is 'fp4'");
  }
  output = train_sft(int8, dir_ / "run", "nf4", &code);
  EXPECT_EQ(code, 2) << output;
  EXPECT_CONTAINS(output, (int8 / "config.json").string() + ": 'quantization_config.load_in_8bit' is true");
}

}  // namespace
}  // namespace ferry
