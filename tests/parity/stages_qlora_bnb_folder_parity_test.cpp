// Model folders bitsandbytes saved in 4 bits (bnb_folder_ref.py: transformers' save_pretrained of
// a tiny Llama loaded with BitsAndBytesConfig(load_in_4bit, nf4), double quant on (dq1) and off with
// every o_proj left in fp32 by llm_int8_skip_modules (dq0), and as dq1 with the codes stored as
// bf16 (bnb_4bit_quant_storage, bf16_storage)), fp32 on the CPU:
//   - lora.quantize_base nf4 loading takes every stored 4-bit projection as it is: the packed
//     codes, absmax, nested absmax, code books and quant-state JSON Ferry holds (and would save)
//     equal the file's bit for bit; dq0's o_proj stay fp32 with the file's values;
//   - its logits equal transformers' 4-bit model loaded back from the folder within 1e-4 (the
//     same dequantised weights; only the order of float sums differs), and so do the logits of the
//     folder dequantised into a float model (lora.quantize_base none, `ferry generate`/`eval`);
//   - through the CLI: `ferry train-sft` (QLoRA, 3 steps) from dq1, `ferry export` of its last
//     checkpoint, which transformers loads and whose logits equal Ferry's trained model (base +
//     adapters) within 1e-4 (bnb_folder_check.py); `ferry generate` and `ferry eval` run on dq1.
// The measured differences are printed. Skipped when the fixture says bitsandbytes is missing.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/file_util.h"
#include "src/io/nf4_checkpoint.h"
#include "src/io/safetensors.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/model/quantized_base.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/integration/ferry_process.h"
#include "train/model_setup.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

constexpr double kLogitTolerance = 1e-4;

// The fixture folder, or "" when the reference skipped (no bitsandbytes in the venv).
fs::path fixture() {
  const auto folder = fs::path(FERRY_FIXTURES_DIR) / "bnb_folder";
  if (fs::exists(folder / "SKIPPED")) return {};
  if (!fs::exists(folder / "dq0" / "logits.safetensors")) {
    ADD_FAILURE() << "missing fixtures in " << folder << ": run `ctest -R parity_fixture_bnb_folder` first";
  }
  return folder;
}

#define REQUIRE_FIXTURE(folder)                                                                \
  const fs::path folder = fixture();                                                           \
  if (folder.empty()) GTEST_SKIP() << read_file(fs::path(FERRY_FIXTURES_DIR) / "bnb_folder" / "SKIPPED")

// Largest |a - b| over the tokens the mask keeps.
double logit_error(const torch::Tensor& ferry, const io::TensorMap& reference) {
  const torch::Tensor keep = reference.at("attention_mask").to(torch::kBool);
  return (ferry.to(torch::kFloat) - reference.at("logits")).index({keep}).abs().max().item<double>();
}

torch::Tensor logits_of(CausalLMImpl& model, const io::TensorMap& inputs) {
  torch::NoGradGuard no_grad;
  return model.forward(inputs.at("input_ids"), inputs.at("attention_mask"));  // (B, T, V)
}

class BnbFolder : public ::testing::TestWithParam<const char*> {};

TEST_P(BnbFolder, Nf4LoadingTakesTheStoredBitsAndGivesTransformersLogits) {
  REQUIRE_FIXTURE(root);
  torch::set_num_threads(1);
  const fs::path dir = root / GetParam();
  const bool dq1 = std::string(GetParam()) != "dq0";  // bf16_storage holds dq1's bytes
  const io::TensorMap file = io::load_safetensors(dir / "model.safetensors");
  QuantizedLoadReport report;
  // double_quant true for both: the file decides (dq0 is not double-quantised).
  CausalLM model = causal_lm_from_pretrained_nf4(dir, at::kFloat, /*double_quant=*/true, &report);
  EXPECT_EQ(report.stored, dq1 ? 14 : 12);
  EXPECT_EQ(report.stored_double_quant, dq1 ? 14 : 0);
  EXPECT_EQ(report.quantized, 0) << "nothing may be requantised";
  EXPECT_EQ(report.kept_float.size(), dq1 ? 0u : 2u);
  const io::TensorMap ferry = state_of(*model);
  int groups = 0, compared = 0;
  for (const auto& [name, want] : file) {
    auto it = ferry.find(name);
    ASSERT_NE(it, ferry.end()) << "Ferry's model lacks " << name;
    const bool packed = file.count(name + ".absmax") > 0;
    groups += packed;
    if (!packed && !io::is_nf4_side_tensor(name)) continue;  // embeddings, norms, fp32 projections: below
    if (!packed || want.scalar_type() == torch::kByte) {  // Ferry holds codes as uint8 whatever the storage
      ASSERT_EQ(it->second.sizes(), want.sizes()) << name;
      ASSERT_EQ(it->second.scalar_type(), want.scalar_type()) << name;
    }
    EXPECT_TRUE(torch::equal(it->second.contiguous().view(torch::kByte).reshape({-1}),
                             want.contiguous().view(torch::kByte).reshape({-1})))
        << name << " differs from the file";
    ++compared;
  }
  EXPECT_EQ(groups, dq1 ? 14 : 12);
  EXPECT_EQ(compared, dq1 ? 14 * 6 : 12 * 4);  // (W, absmax, quant_map[, nested_absmax, nested_quant_map], state)
  if (!dq1) {
    for (int layer = 0; layer < 2; ++layer) {
      const std::string name = "model.layers." + std::to_string(layer) + ".self_attn.o_proj.weight";
      EXPECT_TRUE(torch::equal(ferry.at(name), file.at(name))) << name << " should stay the file's fp32 weight";
    }
  }
  std::cout << GetParam() << ": " << compared << " 4-bit tensors of " << groups << " projections equal the file's\n";

  const io::TensorMap reference = io::load_safetensors(dir / "logits.safetensors");
  const double nf4_error = logit_error(logits_of(*model, reference), reference);
  CausalLM dequantised = causal_lm_from_pretrained(dir);
  const double float_error = logit_error(logits_of(*dequantised, reference), reference);
  std::cout << GetParam() << ": max |logits - transformers' 4-bit model|: " << nf4_error << " (quantize_base nf4), "
            << float_error << " (dequantised into fp32)\n";
  EXPECT_LE(nf4_error, kLogitTolerance);
  EXPECT_LE(float_error, kLogitTolerance);
}

INSTANTIATE_TEST_SUITE_P(Folders, BnbFolder, ::testing::Values("dq1", "dq0", "bf16_storage"),
                         [](const auto& info) { return std::string(info.param); });

TEST(BnbFolderCli, TrainSftExportGenerateAndEval) {
  REQUIRE_FIXTURE(root);
  torch::set_num_threads(1);
  const std::string source = FERRY_SOURCE_DIR;
  const fs::path dir = ferry_test::process_temp_dir("ferry_bnb_folder_cli");
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The downloaded folder as users have it, with its tokenizer.
  const fs::path model = dir / "model";
  fs::copy(root / "dq1", model);
  fs::copy_file(source + "/data/tokenizer.model", model / "tokenizer.model");

  const std::string targets = "[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]";
  const std::string yaml = ferry_test::write_text(
      dir, "sft.yaml",
      "stage: sft\nmodel: {path: " + model.string() +
          "}\ntokenizer: {path: data/tokenizer.model, chat_template: demo}\n"
          "data: {train_file: data/sft_train.jsonl, max_samples: 16, max_length: 64}\n"
          "train: {micro_batch_size: 4, max_steps: 3, learning_rate: 1.0e-2, warmup_steps: 0}\n"
          "lora: {rank: 4, alpha: 8, dropout: 0.0, target_modules: " + targets + ", quantize_base: nf4}\n"
          "output: {dir: " + (dir / "sft").string() + "}\n");
  const auto train = ferry_test::run_ferry("train-sft --config '" + yaml + "'" + ferry_test::kQuietCpu);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_CONTAINS(train.output, "stores 14 projections in 4 bits (NF4, double-quantised): used as stored");
  const fs::path step = dir / "sft" / "step-3";
  ASSERT_TRUE(fs::exists(step / "config.json")) << train.output;

  const auto exported = ferry_test::run_ferry("export --checkpoint '" + step.string() + "' --output '" +
                                              (dir / "merged").string() + "' --lora merged");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  // Ferry's trained model as it resumes from step-3: the stored 4-bit base + the adapters.
  Config config;
  config.model.path = model.string();
  config.lora.rank = 4;
  config.lora.alpha = 8;
  config.lora.dropout = 0.0;
  config.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  config.lora.quantize_base = BaseQuantization::nf4;
  CausalLM trained = causal_lm_from_pretrained_nf4(model, at::kFloat, true);
  prepare_lora(*trained, config);
  stage_trained_model("policy", *trained, trained->config(), config, Tokenizer(source + "/data/tokenizer.model"))
      .load(step);
  trained->eval();
  const io::TensorMap reference = io::load_safetensors(root / "dq1" / "logits.safetensors");
  const torch::Tensor logits = logits_of(*trained, reference);
  EXPECT_GT(logit_error(logits, reference), 1e-3) << "training did not change the model";
  const fs::path ferry_logits = dir / "ferry_logits.safetensors";
  io::save_safetensors(ferry_logits, {{"input_ids", reference.at("input_ids")},
                                      {"attention_mask", reference.at("attention_mask")},
                                      {"logits", logits.contiguous()}});
  const auto check = ferry_test::run_command(std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" +
                                             source + "/tests/parity/bnb_folder_check.py' '" +
                                             (dir / "merged").string() + "' '" + ferry_logits.string() + "'");
  std::cout << check.output;
  EXPECT_EQ(check.exit_code, 0) << "transformers disagrees with Ferry's export:\n" << check.output;

  const auto generate = ferry_test::run_ferry("generate --model '" + model.string() +
                                              "' --prompt hello --greedy --max-new-tokens 4");
  EXPECT_EQ(generate.exit_code, 0) << generate.output;
  const auto eval = ferry_test::run_ferry("eval --model '" + model.string() +
                                          "' --prompts data/prompts_eval.jsonl --limit 2 --max-new-tokens 4");
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry
