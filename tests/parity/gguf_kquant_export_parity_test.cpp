// llama-quantize's file types from Ferry's GGUF export (--gguf-type q4_0, q5_0, q4_k_s, q4_k_m,
// q5_k_m, q6_k) against llama.cpp's own llama_model_quantize, for four tiny random models
// (gguf_kquant_export_ref.py: llama with 8 layers and a 640-value ffn_down that hits the fallback
// types, qwen2 with tied embeddings, phi3 with fused attn_qkv, gemma3 with its norms and tied
// embeddings). Each model is exported by io::export_gguf_model at f32 and at every type; then
// gguf_kquant_export_check.py has llama.cpp quantise the f32 file to each type and checks that Ferry's
// file has the same tensors with the same ggml types and the same bytes, that llama.cpp gives the
// same logits on both files, and how far each type's logits are from f32's (printed, bounded).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "src/io/gguf_export.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {
namespace fs = std::filesystem;

const char* const kTypes[] = {"q4_0", "q5_0", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k"};

fs::path fixture(const std::string& name) { return fs::path(FERRY_FIXTURES_DIR) / "gguf_kquant_export" / name; }

fs::path scratch() {
  static const fs::path dir = test_support::process_scratch_dir(
      "gguf_kquant_export", [] { return ::testing::UnitTest::GetInstance()->Failed(); });
  return dir;
}

fs::path export_as(const std::string& name, const std::string& type) {
  io::GgufExportOptions options;
  options.checkpoint = fixture(name);
  options.output = scratch() / name / (type + ".gguf");
  options.type = io::parse_gguf_file_type(type);
  options.name = "ferry kquant fixture";
  fs::create_directories(scratch() / name);
  const auto start = std::chrono::steady_clock::now();
  const io::GgufExportSummary summary = io::export_gguf_model(options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << name << " " << type << ": " << summary.tensors << " tensors,";
  for (const auto& [ggml_type, count] : summary.tensor_types) std::cout << " " << count << " " << ggml_type;
  std::cout << ", " << summary.file_bytes << " bytes in " << seconds << " s\n";
  return summary.file;
}

class GgufKquantExport : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufKquantExport, TypesAndBlocksEqualLlamaQuantize) {
  const std::string name = GetParam();
  ASSERT_TRUE(fs::exists(fixture(name) / "config.json"))
      << "missing " << fixture(name) << ": run `ctest -R parity_fixture_gguf_kquant_export` first";
  const fs::path f32 = export_as(name, "f32");
  std::string arguments = "'" + f32.string() + "' '" + (scratch() / name / "llama").string() + "'";
  for (const char* type : kTypes) arguments += std::string(" ") + type + "='" + export_as(name, type).string() + "'";
  const std::string command = std::string("PYTHONDONTWRITEBYTECODE=1 '") + FERRY_PYTHON + "' '" + FERRY_SOURCE_DIR +
                              "/tests/parity/gguf_kquant_export_check.py' " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  std::cout << output;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    GTEST_SKIP() << "[needs llama_cpp] llama-cpp-python is not in the deps venv (scripts/deps.sh installs it)";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "gguf_kquant_export_check.py failed: see above";
}

INSTANTIATE_TEST_SUITE_P(Families, GgufKquantExport, ::testing::Values("llama", "qwen2", "phi3", "gemma3"));

}  // namespace
}  // namespace ferry
