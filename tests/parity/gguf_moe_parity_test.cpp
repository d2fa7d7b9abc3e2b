// GGUF import and export of the Mixture-of-Experts families (qwen3moe, qwen2moe, olmoe, and Mixtral as
// llama with experts), on gguf_moe_ref.py's tiny random models shaped as llama.cpp runs them:
//   - export: io::export_gguf_model at f32, f16 and q8_0; gguf_moe_check.py finds the converter's
//     metadata, stacked tensors, types and bytes (gguf_moe_convert.py restates convert_hf_to_gguf.py),
//     and llama.cpp's logits (llama-cpp-python) and, for qwen2moe / qwen3moe, transformers' gguf_file=
//     logits equal to transformers' on the weights the file holds (at f32 the source's); Ferry reads
//     its own file back to those logits too;
//   - import: the fixture's converted.gguf, written by gguf-py (experts in Q8_0 / Q4_0 / Q5_1), read by
//     Ferry as `--model FILE.gguf` reads it, gives transformers' logits of the weights gguf-py
//     dequantises, with the config the metadata says; under lora.quantize_base gguf every expert keeps
//     its slice of the stacked blocks (the byte counts the planner reads agree) and the logits stay;
//   - llama-quantize types: q4_0 ... q6_k of MoE models with 256-wide rows (Mixtral with 8 experts,
//     Qwen2-MoE with a shared expert and rows that fall back) equal llama.cpp's llama_model_quantize
//     of Ferry's f32 export tensor for tensor, byte for byte (gguf_kquant_export_check.py);
//   - refusals: what llama.cpp fixes in code (experts in every layer, top-k renormalisation, untied
//     output, no grouped KV heads for olmoe) is a UserError naming it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/io/gguf_export.h"
#include "src/io/hf_config.h"
#include "src/io/model_path.h"
#include "src/io/safetensors.h"
#include "src/model/family/model_family.h"
#include "src/model/pretrained.h"
#include "src/model/quantized_base.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;

const std::vector<std::string> kFamilies = {"qwen3_moe", "qwen2_moe", "mixtral", "olmoe"};

fs::path fixture(const std::string& name) { return fs::path(FERRY_FIXTURES_DIR) / "gguf_moe" / name; }

fs::path scratch() {
  static const fs::path dir = test_support::process_scratch_dir(
      "gguf_moe", [] { return ::testing::UnitTest::GetInstance()->Failed(); });
  return dir;
}

struct CommandResult {
  int status = -1;
  std::string output;
};

// tests/parity/<script> with `arguments` (already quoted): its output and exit status.
CommandResult run_script(const std::string& script, const std::string& arguments) {
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/" + script + "' " + arguments + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

fs::path export_as(const fs::path& checkpoint, const std::string& name, const std::string& type) {
  io::GgufExportOptions options;
  options.checkpoint = checkpoint;
  options.output = scratch() / name / (type + ".gguf");
  options.type = io::parse_gguf_file_type(type);
  options.name = "ferry moe fixture";
  fs::create_directories(scratch() / name);
  const io::GgufExportSummary summary = io::export_gguf_model(options);
  std::cout << name << " " << type << ": " << summary.architecture << ", " << summary.tensors << " tensors,";
  for (const auto& [ggml_type, count] : summary.tensor_types) std::cout << " " << count << " " << ggml_type;
  std::cout << ", " << summary.file_bytes << " bytes\n";
  for (const std::string& warning : summary.warnings) std::cout << "  warning: " << warning << "\n";
  return summary.file;
}

// Largest |a - b| over the positions where mask (B, T) is 1; a, b: (B, T, V).
double max_error_on_tokens(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  const torch::Tensor keep = mask.to(torch::kBool).unsqueeze(-1);
  return ((a.to(torch::kFloat) - b.to(torch::kFloat)).abs() * keep).max().item<double>();
}

torch::Tensor logits_of(CausalLM& model, const io::TensorMap& inputs) {
  torch::NoGradGuard no_grad;
  return model(inputs.at("input_ids"), inputs.at("attention_mask"));
}

class GgufMoeCase : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    ASSERT_TRUE(fs::exists(fixture(GetParam()) / "logits.safetensors") || GetParam().starts_with("kquant_"))
        << "missing " << fixture(GetParam()) << ": run `ctest -R parity_fixture_gguf_moe` first";
  }
};

class GgufMoeExport : public GgufMoeCase {};
class GgufMoeImport : public GgufMoeCase {};
class GgufMoeKquant : public GgufMoeCase {};

TEST_P(GgufMoeExport, ConverterLayoutLlamaCppTransformersAndFerryReadItAsTransformersRuns) {
  const std::string name = GetParam();
  const io::TensorMap inputs = io::load_safetensors(fixture(name) / "logits.safetensors");
  const std::vector<std::string> types = {"f32", "f16", "q8_0"};
  std::string arguments = quoted(fixture(name));
  std::map<std::string, fs::path> files;
  for (const std::string& type : types) {
    files[type] = export_as(fixture(name) / "model", name, type);
    arguments += " " + type + "=" + quoted(files[type]);
  }
  const CommandResult check = run_script("gguf_moe_check.py", arguments);
  std::cout << check.output;
  if (check.status == 77) GTEST_SKIP() << "[needs llama_cpp] llama-cpp-python is not in the deps venv";
  EXPECT_EQ(check.status, 0) << "gguf_moe_check.py failed: see above";
  for (const std::string& type : types) {
    SCOPED_TRACE(type);
    // transformers on the file's weights (at f32 the source's: the fixture's logits), from the check.
    const fs::path reference_file = files[type].string() + ".reference.safetensors";
    ASSERT_TRUE(fs::exists(reference_file));
    const torch::Tensor reference = io::load_safetensors(reference_file).at("logits");
    if (type == "f32") {
      EXPECT_TRUE(torch::allclose(reference, inputs.at("logits"), 0, 1e-6));
    }
    const double scale = reference.abs().max().item<double>();
    CausalLM model = causal_lm_from_pretrained(io::prepare_gguf_model_folder(files[type], scratch() / "cache"));
    const torch::Tensor logits = logits_of(model, inputs);
    ASSERT_EQ(logits.sizes(), reference.sizes());
    const double error = max_error_on_tokens(logits, reference, inputs.at("attention_mask"));
    std::cout << name << " " << type << ": Ferry's import of its export, max error " << error
              << " against transformers on the file's weights (logit scale " << scale << ")\n";
    EXPECT_LE(error, 1e-4 * scale);
  }
}

TEST_P(GgufMoeImport, GgufPyFileGivesTransformersLogitsAndKeepsExpertBlocks) {
  const std::string name = GetParam();
  const fs::path folder = io::prepare_gguf_model_folder(fixture(name) / "converted.gguf", scratch() / "cache");
  // The config the metadata gives is the source's, experts included.
  const ModelShape got = io::read_hf_config(folder / "config.json");
  const ModelShape want = io::read_hf_config(fixture(name) / "model" / "config.json");
  EXPECT_EQ(got.model_type, want.model_type);
  EXPECT_EQ(got.moe.num_experts, want.moe.num_experts);
  EXPECT_EQ(got.moe.experts_per_token, want.moe.experts_per_token);
  EXPECT_EQ(got.moe.expert_intermediate_size, want.moe.expert_intermediate_size);
  EXPECT_EQ(got.moe.shared_expert_intermediate_size, want.moe.shared_expert_intermediate_size);
  EXPECT_EQ(got.moe.normalize_top_k, want.moe.normalize_top_k);
  EXPECT_EQ(got.moe.naming, want.moe.naming);
  EXPECT_EQ(got.moe.sparse_layers, want.moe.sparse_layers);
  EXPECT_EQ(got.moe.router_aux_loss_coef, want.moe.router_aux_loss_coef);
  EXPECT_EQ(got.qk_norm, want.qk_norm);
  EXPECT_EQ(got.attention_bias, want.attention_bias);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.rms_norm_eps, static_cast<double>(static_cast<float>(want.rms_norm_eps)));

  const io::TensorMap inputs = io::load_safetensors(fixture(name) / "logits.safetensors");
  const torch::Tensor reference = io::load_safetensors(fixture(name) / "reference_gguf.safetensors").at("logits");
  const torch::Tensor& mask = inputs.at("attention_mask");
  const double scale = reference.abs().max().item<double>();
  CausalLM plain = causal_lm_from_pretrained(folder);
  const torch::Tensor logits = logits_of(plain, inputs);
  const double error = max_error_on_tokens(logits, reference, mask);
  std::cout << name << ": Ferry's import of gguf-py's file, max error " << error << " against transformers on the "
            << "dequantised weights (logit scale " << scale << ")\n";
  EXPECT_LE(error, 1e-4 * scale);

  // lora.quantize_base gguf: each expert keeps its slice of the stack, in the file's type.
  QuantizedLoadReport report;
  CausalLM kept = causal_lm_from_pretrained_quantized(folder, at::kFloat, BaseQuantization::gguf, false, &report);
  const int64_t layers = want.num_hidden_layers, experts = want.moe.num_experts;
  const int64_t shared = want.moe.shared_expert_intermediate_size > 0 ? 3 : 0;  // Q8_0 too
  EXPECT_EQ(report.stored, layers * (3 * experts + shared));
  EXPECT_EQ(report.ggml_types["Q8_0"], layers * (experts + shared));
  EXPECT_EQ(report.ggml_types["Q4_0"], layers * experts);
  EXPECT_EQ(report.ggml_types["Q5_1"], layers * experts);
  uint64_t planned = 0;
  for (const auto& [weight, bytes] : gguf_projection_bytes(folder)) planned += bytes;
  EXPECT_EQ(planned, static_cast<uint64_t>(quantized_base_size(*kept).bytes))
      << "the planner's bytes per expert are the file's";
  const double kept_error = max_error_on_tokens(logits_of(kept, inputs), logits, mask);
  std::cout << name << ": quantize_base gguf keeps " << report.stored << " projections' blocks, logits within "
            << kept_error << " of the dequantised model's\n";
  EXPECT_LE(kept_error, 1e-4 * scale);
}

TEST_P(GgufMoeKquant, TypesAndBlocksEqualLlamaQuantize) {
  const std::string name = GetParam();
  const fs::path model = fixture(name);
  ASSERT_TRUE(fs::exists(model / "config.json")) << "missing " << model << ": run `ctest -R parity_fixture_gguf_moe`";
  std::string arguments = quoted(export_as(model, name, "f32")) + " " + quoted(scratch() / name / "llama");
  for (const char* type : {"q4_0", "q5_0", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k"}) {
    arguments += std::string(" ") + type + "=" + quoted(export_as(model, name, type));
  }
  const CommandResult check = run_script("gguf_kquant_export_check.py", arguments);
  std::cout << check.output;
  if (check.status == 77) GTEST_SKIP() << "[needs llama_cpp] llama-cpp-python is not in the deps venv";
  EXPECT_EQ(check.status, 0) << "gguf_kquant_export_check.py failed: see above";
}

// write_gguf of `name`'s fixture config after `change`: the UserError's message, or "" when none.
template <typename Change>
std::string refusal(const std::string& name, Change change) {
  ModelShape config = io::read_hf_config(fixture(name) / "model" / "config.json");
  change(config);
  try {
    family_of(config).write_gguf(config);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(GgufMoeExportRefuses, WhatLlamaCppFixesInCode) {
  EXPECT_EQ(refusal("qwen3_moe", [](ModelShape&) {}), "");
  EXPECT_NE(refusal("qwen3_moe", [](ModelShape& c) { c.moe.sparse_layers = {true, false, true}; })
                .find("experts in every layer"),
            std::string::npos);
  EXPECT_NE(refusal("qwen3_moe", [](ModelShape& c) { c.moe.normalize_top_k = false; }).find("norm_topk_prob true"),
            std::string::npos);
  EXPECT_NE(refusal("qwen2_moe", [](ModelShape& c) { c.moe.normalize_top_k = true; }).find("norm_topk_prob false"),
            std::string::npos);
  EXPECT_NE(refusal("qwen2_moe", [](ModelShape& c) { c.tie_word_embeddings = true; }).find("output.weight"),
            std::string::npos);
  EXPECT_NE(refusal("olmoe", [](ModelShape& c) { c.num_key_value_heads = 2; }).find("num_key_value_heads"),
            std::string::npos);
  EXPECT_NE(refusal("olmoe", [](ModelShape& c) { c.head_dim = 32; }).find("num_attention_heads x head_dim"),
            std::string::npos);
  EXPECT_EQ(refusal("mixtral", [](ModelShape&) {}), "");
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Families, GgufMoeExport, ::testing::ValuesIn(kFamilies), case_name);
INSTANTIATE_TEST_SUITE_P(Families, GgufMoeImport, ::testing::ValuesIn(kFamilies), case_name);
INSTANTIATE_TEST_SUITE_P(Families, GgufMoeKquant,
                         ::testing::Values("kquant_mixtral", "kquant_qwen2_moe", "kquant_qwen3_moe", "kquant_olmoe"),
                         case_name);

}  // namespace
}  // namespace ferry
